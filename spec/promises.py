"""What a configuration promises: for each invariant, whether Kafka guarantees it there.

Every verdict (`isrlab check`, `replay`, `campaign`) asks this one table. A broken invariant the
configuration promises is a bug; one it does not promise is the configuration's trade-off, a
loss Kafka accepts by design (docs/protocol.md, "Known bugs").

The trade-offs, each a setting and the invariants it gives up:
- acks below all (B10): the leader acknowledges a write before any follower has it, so an
  acknowledged write may be lost (AckedWritesDurable). What is committed stays committed.
- unclean leader election (B9): a replica outside the ISR may lead without what the ISR
  committed, so acknowledged writes, committed records a consumer read, and the committed
  prefix other replicas hold may all be lost (AckedWritesDurable,
  ConsumerNeverSeesUncommitted, LogMatching). The ISR's own bookkeeping (NoCommittedDataLoss,
  LeaderInIsr) still holds: the new leader is the whole new ISR.
- eligible leader replicas off (B8): the last ISR member may come back from a crash without
  what it lost and be elected, which only KIP-966 rules out (AckedWritesDurableKip966,
  LeaderCandidatesComplete). EligibleReplicasWellFormed is promised everywhere: with ELR off
  it says the ELR fields stay empty.

A protocol variant never makes a trade-off: `hw-truncation`, `kip-101`, ... promise what Kafka
promised, and their violations are the bugs the catalogue lists (B1-B7). Crashes that lose
unflushed records are not a trade-off either: the invariants excuse exactly the loss Kafka's
guarantee allows (spec/invariants.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spec.config import Config
from spec.invariants import INVARIANTS


@dataclass(frozen=True, slots=True)
class Promise:
    """Whether `config` promises `invariant`; when not, `why` says so in one line."""

    invariant: str
    promised: bool
    why: str = ""


@dataclass(frozen=True, slots=True)
class TradeOff:
    """A setting Kafka offers that gives up some invariants by design."""

    entry: str  # the catalogue entry in docs/protocol.md
    applies: Callable[[Config], bool]
    invariants: tuple[str, ...]
    why: str


TRADE_OFFS: tuple[TradeOff, ...] = (
    TradeOff("B10", lambda c: c.acks != "all", ("AckedWritesDurable",),
             "acks below all: the leader acknowledges a write no follower has yet"),
    TradeOff("B9", lambda c: c.unclean_leader_election_enable,
             ("AckedWritesDurable", "ConsumerNeverSeesUncommitted", "LogMatching"),
             "unclean leader election: a replica outside the ISR may lead without what the "
             "ISR committed"),
    TradeOff("B8", lambda c: not c.eligible_leader_replicas_enable,
             ("AckedWritesDurableKip966", "LeaderCandidatesComplete"),
             "eligible leader replicas off: the last ISR member may come back from a crash "
             "without a write and lead, which only KIP-966 rules out"),
)


def promise(config: Config, invariant: str) -> Promise:
    """Whether `config` promises `invariant` (a name of spec.invariants.INVARIANTS)."""
    if invariant not in INVARIANTS:
        raise KeyError(f"unknown invariant {invariant!r}")
    for trade in TRADE_OFFS:
        if invariant in trade.invariants and trade.applies(config):
            return Promise(invariant, False, f"{trade.why} ({trade.entry})")
    return Promise(invariant, True)


def promises(config: Config, names=None) -> list[Promise]:
    """`promise` of each of `names` (every invariant when None), in INVARIANTS order."""
    return [promise(config, name) for name in INVARIANTS if names is None or name in names]


def promised(config: Config, names=None) -> list[str]:
    """The names among `names` (every invariant when None) that `config` promises."""
    return [p.invariant for p in promises(config, names) if p.promised]


def given_up(config: Config) -> frozenset[str]:
    """The invariants `config` does not promise (its trade-offs'): what the client-anomaly split
    (vocab.anomalies) excuses."""
    return frozenset(p.invariant for p in promises(config) if not p.promised)


# Crashes that lose unflushed records are no trade-off: the invariants excuse that loss by the
# spec's ghost state. A client history has no ghost state, so a run whose faults may lose
# unflushed records shows the excused loss as these invariants broken.
UNFLUSHED_CRASH_LOSSES = ("AckedWritesDurable", "ConsumerNeverSeesUncommitted")


def excused_in_history(config: Config, losing_faults: bool) -> frozenset[str]:
    """`given_up(config)`, and when the run has `losing_faults` (crashes of brokers) and not
    every append is flushed, what such a crash may show lost in a client history."""
    if losing_faults and config.log_flush_interval_messages != 1:
        return given_up(config) | frozenset(UNFLUSHED_CRASH_LOSSES)
    return given_up(config)
