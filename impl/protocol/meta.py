"""The metadata store and the controller logic that runs beside it: a sans-I/O core.

Theory of operation. One `MetaCore` plays the metadata store (ZooKeeper, or the KRaft quorum)
and the controller: it keeps broker sessions (registration with a per-broker epoch, heartbeats,
expiry), the versioned state of every partition (leader, leader epoch, ISR, partition epoch),
and applies the controller's decisions atomically with the store writes they need, as a KRaft
controller does with its metadata log. Its transitions:

- a broker's session expires (no heartbeat for `session.timeout.ms`), or the broker starts again
  while its old session lingers: `ControllerHandleBrokerFailure`, one batch over every
  partition: the broker leaves each ISR (except as the last member), every partition it led gets
  a new leader (clean: the first live ISR member in assignment order; unclean only when
  enabled) or goes offline, and LeaderAndIsr goes to the live replicas;
- a broker registers: `BrokerRestart` (new process) or `BrokerRegister` (a live broker whose
  session expired), then `ControllerElectLeader` for each offline partition it can lead;
- a leader's `AlterIsr`: `LeaderShrinkIsr` / `LeaderExpandIsr` when the compare-and-set on
  (leader epoch, partition epoch) holds (and, with broker epochs, the follower's session is the
  one it fetched with); answered idempotently on retry;
- every `preferred.leader.check.interval.ms`: `ControllerElectPreferredLeader`.

With `eligible.leader.replicas.enable` (KIP-966) every partition change follows Kafka's
`PartitionChangeBuilder`: below min ISR the members that leave the ISR join the eligible leader
replicas (ELR); a fenced last member leaves the ISR too; an election takes the first registered
ISR member, or an ELR member when the ISR is empty, or the last known leader when both are
empty (an unclean election, as Kafka counts it); and a broker that registers after a crash
(every crash is an unclean shutdown) leaves every ELR.

Inputs: `on_message(now_ms, src, mid, message)`, `on_timer(now_ms)`; `next_deadline()`.
"""

from __future__ import annotations

from impl.config import ClusterConfig
from impl.protocol.broker import broker_node
from impl.protocol.messages import (
    INVALID_UPDATE_VERSION,
    NO_LEADER,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    STALE_BROKER_EPOCH,
    UNKNOWN,
    AlterIsr,
    AlterIsrResponse,
    Heartbeat,
    HeartbeatResponse,
    LeaderAndIsr,
    Message,
    MetadataRequest,
    MetadataResponse,
    RegisterBroker,
    RegisterBrokerResponse,
    Send,
    Transition,
)
from vocab.actions import ActionName as A
from vocab.outcomes import Code

MAX_REMEMBERED_ALTERS = 1024


class PartitionRecord:
    __slots__ = ("leader", "leader_epoch", "isr", "partition_epoch", "elr", "last_known_elr",
                 "committed_alters")

    def __init__(self, leader: int, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int):
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.elr: tuple[int, ...] = ()  # KIP-966 eligible leader replicas
        self.last_known_elr: tuple[int, ...] = ()  # the last known leader, by default
        # Answers to the ISR changes committed so far, by request id, so that a retry gets the
        # original answer even after later changes (a leader whose answer was lost in a network
        # partition must still learn the ISR and partition epoch it committed). Bounded.
        self.committed_alters: dict[str, AlterIsrResponse] = {}


class MetaCore:
    """The metadata store with the controller (see the module docstring)."""

    node = "meta"

    def __init__(self, config: ClusterConfig, now: int = 0):
        """Bootstrap: every broker registered with broker epoch 0 and each partition created
        with its placement, led by its preferred replica in epoch 0 with the full ISR, as if
        every broker had already applied that LeaderAndIsr (the spec's initial state)."""
        self.config = config
        self.mutants = config.mutants
        n = config.brokers
        self.registered = [0] * n
        self.broker_epochs = [0] * n
        self.incarnations = [0] * n  # the process behind each registration
        self.last_heartbeat = [now] * n
        self.partitions = []
        for p in range(config.partitions):
            assignment = config.assignment(p)
            self.partitions.append(PartitionRecord(assignment[0], 0, tuple(sorted(assignment)), 0))
        self.expiry_check_at = now + config.heartbeat_interval_ms
        self.preferred_at = now + config.preferred_leader_check_interval_ms
        self.unclean_elections = 0

    def initial_view(self, partition: int) -> LeaderAndIsr:
        ps = self.partitions[partition]
        return LeaderAndIsr(partition, ps.leader, ps.leader_epoch, ps.isr, ps.partition_epoch)

    def next_deadline(self) -> int:
        return min(self.expiry_check_at, self.preferred_at)

    # Inputs ----------------------------------------------------------------------------------

    def on_message(self, now: int, src: str, mid: str, m: Message) -> list:
        kind = type(m)
        n = self.config.brokers
        broker = getattr(m, "broker", getattr(m, "leader", None))
        if kind in (RegisterBroker, Heartbeat, AlterIsr) and not (
            isinstance(broker, int) and 0 <= broker < n and src == broker_node(broker)
        ):
            return []  # a request that names a broker other than its sender
        if kind is Heartbeat:
            alive = self.registered[m.broker] == m.broker_epoch != UNKNOWN
            if alive:
                self.last_heartbeat[m.broker] = now
            return [Send(src, HeartbeatResponse(m.broker, alive))]
        if kind is RegisterBroker:
            return self._register(now, m, mid)
        if kind is AlterIsr:
            return self._alter_isr(now, src, mid, m)
        if kind is MetadataRequest:
            if not 0 <= m.partition < len(self.partitions):
                return []
            ps = self.partitions[m.partition]
            return [Send(src, MetadataResponse(m.partition, ps.leader, ps.leader_epoch))]
        return []

    def on_timer(self, now: int) -> list:
        effects: list = []
        if now >= self.expiry_check_at:
            self.expiry_check_at = now + self.config.heartbeat_interval_ms
            for b in range(self.config.brokers):
                expired = now - self.last_heartbeat[b] > self.config.session_timeout_ms
                if self.registered[b] != UNKNOWN and expired:
                    effects += self._handle_broker_failure(now, b, None)
        if now >= self.preferred_at:
            self.preferred_at = now + self.config.preferred_leader_check_interval_ms
            for p in range(len(self.partitions)):
                effects += self._elect_preferred(p)
        return effects

    # Transitions -----------------------------------------------------------------------------

    def _state(self, changed: list[int]) -> dict:
        elr = self.config.eligible_leader_replicas_enable
        partitions = []
        for p in changed:
            ps = self.partitions[p]
            row = {"partition": p, "leader": ps.leader, "leader_epoch": ps.leader_epoch,
                   "isr": list(ps.isr), "partition_epoch": ps.partition_epoch}
            if elr:
                row["elr"] = list(ps.elr)
                row["last_known_elr"] = list(ps.last_known_elr)
            partitions.append(row)
        return {"partitions": partitions, "registered": list(self.registered)}

    def _leader_and_isr(self, t: Transition, p: int, to: tuple[int, ...] | None = None) -> None:
        ps = self.partitions[p]
        for b in (self.config.assignment(p) if to is None else to):
            if self.registered[b] != UNKNOWN:
                t.sends.append((broker_node(b), LeaderAndIsr(
                    p, ps.leader, ps.leader_epoch, ps.isr, ps.partition_epoch,
                    self.registered[b])))

    def _elect(self, p: int, isr: tuple[int, ...]) -> tuple[int, tuple[int, ...], bool]:
        """(leader, ISR, unclean?) or (NO_LEADER, isr, False)."""
        live = [b for b in self.config.assignment(p) if self.registered[b] != UNKNOWN]
        unclean_ok = (self.config.unclean_leader_election_enable
                      or self.mutants.unclean_when_disabled)
        for b in live:
            if b in isr:
                return b, tuple(sorted(x for x in isr if self.registered[x] != UNKNOWN)), False
        if unclean_ok and live:
            return live[0], (live[0],), True
        return NO_LEADER, isr, False

    # KIP-966 ----------------------------------------------------------------------------------

    def _elr_change(self, p: int, isr: tuple[int, ...], elect: bool,
                    unclean_shutdown: int | None = None) -> str | None:
        """Apply a change of partition `p` to `isr` as PartitionChangeBuilder does; return how
        a leader was elected ("clean", "elr", "last-known", "unclean") or None."""
        ps = self.partitions[p]
        config = self.config
        if len(isr) >= config.min_insync_replicas:
            elr, last_known = (), ()
        else:
            pool = set(ps.elr) | set(ps.isr)
            elr = tuple(sorted(x for x in pool if x not in isr and x != unclean_shutdown))
            last_known = tuple(sorted((pool | set(ps.last_known_elr)) - set(isr) - set(elr)))
        leader, how = ps.leader, None
        if elect:
            leader, how = self._elr_elect(p, isr, elr)
        if how == "elr":
            isr, elr = (leader,), tuple(x for x in elr if x != leader)
        elif how in ("last-known", "unclean"):
            isr, elr, last_known = (leader,), (), ()
        if config.last_known_leader_election_enable:
            if not isr and ps.leader != NO_LEADER:
                last_known = (ps.leader,)
            elif leader != NO_LEADER:
                last_known = ()
            else:
                last_known = ps.last_known_elr
        if leader != ps.leader:
            ps.leader_epoch += 1
        ps.leader, ps.isr, ps.elr, ps.last_known_elr = leader, tuple(sorted(isr)), elr, last_known
        ps.partition_epoch += 1
        self.unclean_elections += how in ("last-known", "unclean")
        return how

    def _elr_elect(self, p: int, isr: tuple[int, ...], elr: tuple[int, ...]):
        ps = self.partitions[p]

        def valid(b: int) -> bool:
            return self.registered[b] != UNKNOWN and (b in isr or (not isr and b in elr))

        if ps.leader != NO_LEADER and valid(ps.leader):
            return ps.leader, None
        for b in self.config.assignment(p):
            if valid(b):
                return b, ("elr" if b in elr else "clean")
        if (self.config.last_known_leader_election_enable and not isr and not elr
                and len(ps.last_known_elr) == 1):
            # As Kafka's source: the last known leader need not be registered.
            return ps.last_known_elr[0], "last-known"
        if self.config.unclean_leader_election_enable:
            for b in self.config.assignment(p):
                if self.registered[b] != UNKNOWN:
                    return b, "unclean"
        return NO_LEADER, None

    def _handle_broker_failure(self, now: int, b: int, recv: str | None) -> list:
        self.registered[b] = UNKNOWN
        changed = []
        changes = []  # [partition, leader, leader epoch, ISR] of each changed partition
        elected = 0  # partitions given a new leader (one left offline is not an election)
        t = Transition(A.CONTROLLER_HANDLE_BROKER_FAILURE, {"broker": b},
                       Code.BROKER_FAILURE_HANDLED, recv=recv)
        for p, ps in enumerate(self.partitions):
            if b not in ps.isr and ps.leader != b:
                continue
            if self.config.eligible_leader_replicas_enable:
                before = (ps.leader, ps.leader_epoch, ps.isr, ps.elr, ps.last_known_elr)
                self._elr_change(p, tuple(x for x in ps.isr if x != b), elect=True)
                if (ps.leader == before[0] and ps.isr != before[2]
                        and self.config.rules.isr_shrink_bumps_leader_epoch):
                    ps.leader_epoch += 1
                if (ps.leader, ps.leader_epoch, ps.isr, ps.elr, ps.last_known_elr) == before:
                    ps.partition_epoch -= 1  # nothing changed: no record written
                    continue
                elected += ps.leader not in (before[0], NO_LEADER)
                changed.append(p)
                changes.append([p, ps.leader, ps.leader_epoch, list(ps.isr)])
                self._leader_and_isr(t, p)
                continue
            isr = ps.isr
            if b in isr and len(isr) > 1:
                isr = tuple(x for x in isr if x != b)
            leader, epoch = ps.leader, ps.leader_epoch
            if ps.leader == b:
                leader, isr, unclean = self._elect(p, isr)
                self.unclean_elections += unclean
                epoch += 1
            elif isr != ps.isr and self.config.rules.isr_shrink_bumps_leader_epoch:
                epoch += 1
            if (leader, epoch, isr) == (ps.leader, ps.leader_epoch, ps.isr):
                continue
            elected += leader not in (ps.leader, NO_LEADER)
            ps.leader, ps.leader_epoch, ps.isr = leader, epoch, isr
            ps.partition_epoch += 1
            changed.append(p)
            changes.append([p, leader, epoch, list(isr)])
            self._leader_and_isr(t, p)
        # The store does not know which acknowledged writes the failure lost: none excused.
        t.outcome_args = {"changes": changes, "elected": elected, "excused": []}
        t.state = self._state(changed)
        return [t]

    def _register(self, now: int, m: RegisterBroker, mid: str) -> list:
        b = m.broker
        effects: list = []
        new_process = m.incarnation != self.incarnations[b]
        if self.registered[b] != UNKNOWN:
            if not new_process:
                # A retry from the process that holds the session: the same answer again.
                return [Send(broker_node(b), RegisterBrokerResponse(b, self.registered[b]))]
            # A new process while the old session lingers: that session is over.
            effects += self._handle_broker_failure(now, b, None)
        changed = []
        if new_process and self.config.eligible_leader_replicas_enable:
            # A new process means the old one died without a clean shutdown: it leaves every
            # ELR (it may have lost unflushed records), before it is sent the partitions.
            for p, ps in enumerate(self.partitions):
                if b in ps.elr:
                    self._elr_change(p, ps.isr, elect=False, unclean_shutdown=b)
                    changed.append(p)
        self.broker_epochs[b] += 1
        self.registered[b] = self.broker_epochs[b]
        self.incarnations[b] = m.incarnation
        self.last_heartbeat[b] = now
        action, code = ((A.BROKER_RESTART, Code.BROKER_UP) if new_process
                        else (A.BROKER_REGISTER, Code.REGISTERED))
        t = Transition(action, {"broker": b}, code, {"broker_epoch": self.registered[b]},
                       recv=mid)
        t.sends.append((broker_node(b), RegisterBrokerResponse(b, self.registered[b])))
        for p in changed:
            self._leader_and_isr(t, p, to=tuple(x for x in self.config.assignment(p) if x != b))
        for p in range(len(self.partitions)):
            if b in self.config.assignment(p):
                self._leader_and_isr(t, p, to=(b,))
        t.state = self._state(changed)
        effects.append(t)
        for p, ps in enumerate(self.partitions):
            if ps.leader == NO_LEADER:
                effects += self._elect_offline(p)
        return effects

    def _elect_offline(self, p: int) -> list:
        ps = self.partitions[p]
        if self.config.eligible_leader_replicas_enable:
            return self._elect_offline_elr(p)
        leader, isr, unclean = self._elect(p, ps.isr)
        if leader == NO_LEADER:
            return []
        self.unclean_elections += unclean
        ps.leader, ps.isr = leader, isr
        ps.leader_epoch += 1
        ps.partition_epoch += 1
        t = Transition(A.CONTROLLER_ELECT_LEADER, {"partition": p},
                       Code.ELECTED_UNCLEAN if unclean else Code.ELECTED_CLEAN,
                       {"leader": leader, "leader_epoch": ps.leader_epoch})
        self._leader_and_isr(t, p)
        t.state = self._state([p])
        return [t]

    def _elect_offline_elr(self, p: int) -> list:
        ps = self.partitions[p]
        before = (ps.leader_epoch, ps.partition_epoch, ps.isr, ps.elr, ps.last_known_elr)
        how = self._elr_change(p, ps.isr, elect=True)
        if ps.leader == NO_LEADER:
            ps.leader_epoch, ps.partition_epoch, ps.isr, ps.elr, ps.last_known_elr = before
            return []
        code = {"clean": Code.ELECTED_CLEAN, "elr": Code.ELECTED_ELR,
                "last-known": Code.ELECTED_LAST_KNOWN_LEADER, "unclean": Code.ELECTED_UNCLEAN}[how]
        t = Transition(A.CONTROLLER_ELECT_LEADER, {"partition": p}, code,
                       {"leader": ps.leader, "leader_epoch": ps.leader_epoch})
        self._leader_and_isr(t, p)
        t.state = self._state([p])
        return [t]

    def _elect_preferred(self, p: int) -> list:
        ps = self.partitions[p]
        preferred = self.config.assignment(p)[0]
        if (ps.leader == preferred or preferred not in ps.isr
                or self.registered[preferred] == UNKNOWN):
            return []
        ps.leader = preferred
        ps.leader_epoch += 1
        ps.partition_epoch += 1
        t = Transition(A.CONTROLLER_ELECT_PREFERRED_LEADER, {"partition": p},
                       Code.ELECTED_PREFERRED, {"leader": preferred, "leader_epoch": ps.leader_epoch})
        self._leader_and_isr(t, p)
        t.state = self._state([p])
        return [t]

    def _alter_isr(self, now: int, src: str, mid: str, m: AlterIsr) -> list:
        if not 0 <= m.partition < len(self.partitions):
            return []
        ps = self.partitions[m.partition]
        committed = ps.committed_alters.get(m.request_id)
        if committed is not None:
            return [Send(src, committed)]  # a retry of what we already committed

        def reply(error: str) -> AlterIsrResponse:
            return AlterIsrResponse(m.request_id, m.partition, error, ps.leader, ps.leader_epoch,
                                    ps.isr, ps.partition_epoch)

        if ps.leader != m.leader:
            return [Send(src, reply(NOT_LEADER_OR_FOLLOWER))]
        if (ps.leader_epoch, ps.partition_epoch) != (m.leader_epoch, m.partition_epoch):
            return [Send(src, reply(INVALID_UPDATE_VERSION))]
        n = self.config.brokers
        if not (0 <= m.follower < n) or any(not 0 <= b < n for b in m.isr):
            return []
        if (m.expand and self.config.rules.broker_epochs
                and self.registered[m.follower] != m.follower_broker_epoch):
            return [Send(src, reply(STALE_BROKER_EPOCH))]
        if self.config.eligible_leader_replicas_enable:
            self._elr_change(m.partition, tuple(sorted(m.isr)), elect=False)
        else:
            ps.isr = tuple(sorted(m.isr))
            ps.partition_epoch += 1
        response = reply(NONE)
        ps.committed_alters[m.request_id] = response
        if len(ps.committed_alters) > MAX_REMEMBERED_ALTERS:
            del ps.committed_alters[next(iter(ps.committed_alters))]  # the oldest
        action = A.LEADER_EXPAND_ISR if m.expand else A.LEADER_SHRINK_ISR
        t = Transition(action, {"partition": m.partition, "broker": m.leader,
                                "follower": m.follower}, Code.ISR_CHANGED,
                       {"isr": list(ps.isr)}, recv=mid)
        t.sends.append((src, response))
        t.state = self._state([m.partition])
        return [t]
