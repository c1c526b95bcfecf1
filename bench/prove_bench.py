"""Benchmark of `isrlab prove`: prints figures, asserts nothing about time.

    python bench/prove_bench.py          # B10 BMC, the induction of current and of current with
                                         # B11's fix at 3 brokers (minutes each), diff pairs/s
    python bench/prove_bench.py --b7     # also hw-truncation at the CLI's BMC defaults, where
                                         # the shortest violation is B7 (`--bmc 12`; minutes)
    python bench/prove_bench.py --b1     # also B1: hw-truncation with every write flushed,
                                         # where the shortest violation is a truncation to HW
                                         # (13 steps; minutes)
    python bench/prove_bench.py --buggy  # also the induction with the default lemmas on each
                                         # buggy variant the tests run (2 brokers, a minute or
                                         # two each): each must end in a reachable CTI
    python bench/prove_bench.py --snapshots 2   # also B11's fix with the snapshot layer at
                                         # 2 brokers (or 3), the whole table (minutes)
    python bench/prove_bench.py --delivered 2   # also B11's fix with the snapshot and
                                         # delivered layers, AckedWritesDurable and
                                         # ConsumerNeverSeesUncommitted among the targets
    python bench/prove_bench.py --guards # also each guard of `current` taken out of the
                                         # 2-broker proof of B11's fix, same lemmas (an hour)
    python bench/prove_bench.py --b8     # also B8 (KIP-966's promise broken without ELR):
                                         # BMC beside the explorer, 12 and 14 steps (a minute)

Each line: what ran, its verdict and depth, and seconds; the explorer's depth and seconds on
the same config are printed beside BMC's so the two can be compared in one run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import z3  # noqa: E402

from model_check.explore.explorer import explore  # noqa: E402
from model_check.explore.model import KafkaModel  # noqa: E402
from model_check.prove import symbolic as sym  # noqa: E402
from model_check.prove.engine import TARGETS, bmc, induction  # noqa: E402
from model_check.prove.lemmas import (  # noqa: E402
    DELIVERED_LAYER,
    SNAPSHOT_LAYER,
    STRUCTURE,
    proof_lemmas,
)
from spec import VARIANTS, Config, initial_state  # noqa: E402
from spec.actions import successors  # noqa: E402


def small(variant: str, **changes) -> Config:
    base = dict(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1,
                max_session_expiries=0)
    return Config(variant=VARIANTS[variant], **{**base, **changes})


def b11_fixed(brokers: int) -> Config:
    """`current` with B11's fix (missed_epoch_resets_followers), the proof's target."""
    return Config(brokers=brokers, variant=VARIANTS["current"].with_rules(
        missed_epoch_resets_followers=True))


def bmc_vs_explorer(label: str, config: Config, depth: int,
                    invariants: list[str] | None = None) -> None:
    start = time.perf_counter()
    shortest = explore(KafkaModel(config, invariants))
    explorer_s = time.perf_counter() - start
    cpu = time.process_time()
    found = bmc(config, depth, invariants)
    cpu = time.process_time() - cpu
    per_depth = ", ".join(f"{q.seconds:.1f}" for q in found.queries)
    print(f"{label}: BMC {found.result} {found.invariant} at depth {found.depth} in "
          f"{found.seconds:.1f} s ({cpu:.1f} s CPU; per depth {per_depth}); explorer "
          f"{shortest.result} {shortest.violation.invariant if shortest.violation else ''} at "
          f"depth {shortest.depth} in {explorer_s:.2f} s")


def differential(pairs: int, seed: int = 1) -> None:
    config = small("current", brokers=3, max_records=2, max_leader_epochs=3)
    shape = sym.make_shape(config)
    table = sym.action_table(shape)
    pre, post, a = sym.fresh_state(shape, "s."), sym.fresh_state(shape, "t."), sym.fresh_args(
        shape, "a.")
    rnd = random.Random(seed)
    done = 0
    start = time.perf_counter()
    while done < pairs:
        state = initial_state(config)
        for _ in range(40):
            succ = list(successors(config, state))
            if not succ or done >= pairs:
                break
            action, nxt = rnd.choice(succ)
            solver = z3.Solver()
            solver.add(sym.represent(shape, state, pre), sym.represent(shape, nxt, post),
                       *sym.pin_args(a, action),
                       sym.relation(shape, sym.instance_for(table, action, state), pre, post, a))
            assert solver.check() == z3.sat
            done += 1
            state = nxt
    seconds = time.perf_counter() - start
    print(f"differential (accept direction): {done} pairs in {seconds:.1f} s "
          f"({done / seconds:.0f} pairs/s)")


def buggy_inductions() -> None:
    """The induction `isrlab prove --induction` runs (the default lemmas, the CTI classified by
    the explorer) on the variants that lose a committed write; tests/test_prove.py runs two of
    them so through the CLI. Each must end in a reachable CTI."""
    for variant, without in (("hw-truncation", None), ("kip-101", None), ("kip-320", None),
                             ("current", "broker_epochs")):
        chosen = VARIANTS[variant].with_rules(**{without: False}) if without else \
            VARIANTS[variant]
        config = Config(variant=chosen, brokers=2)
        start, cpu = time.perf_counter(), time.process_time()
        out = induction(config, list(TARGETS), proof_lemmas(list(TARGETS), config))
        cti = out.cti
        label = variant + (f" without {without}" if without else "")
        print(f"induction {label}, 2 brokers, default lemmas: {out.result} ({out.notes[0]}); "
              f"CTI {cti.classification if cti else '-'}"
              f"{' ' + ', '.join(cti.violated) if cti else ''} in "
              f"{time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s CPU)")
        if cti is None or cti.classification != "reachable":
            raise SystemExit(f"{label}: expected a reachable CTI")


GUARDS = ("fencing", "broker_epochs", "expand_requires_epoch_start", "hw_requires_min_isr")


def guard_mutants() -> None:
    """The 2-broker proof of `current` with B11's fix (default lemmas + the snapshot layer),
    then each guard of `current` taken out with the same lemmas: which steps it breaks and
    what they name. min.insync.replicas=1 makes `hw_requires_min_isr` vacuous (an ISR is
    never empty), so that guard is asked at min ISR 2, beside the proof there."""
    for min_isr, guards in ((1, GUARDS[:3]), (2, GUARDS[3:])):
        config = b11_fixed(2).replace(min_insync_replicas=min_isr)
        lemmas = list(dict.fromkeys([*proof_lemmas(list(TARGETS), config), *SNAPSHOT_LAYER]))
        for guard in (None, *guards):
            mutant = config if guard is None else config.replace(
                variant=config.variant.with_rules(**{guard: False}))
            start, cpu = time.perf_counter(), time.process_time()
            out = induction(mutant, list(TARGETS), lemmas)
            label = f"without {guard}" if guard else "as is"
            cti = out.cti
            print(f"B11's fix, 2 brokers, min ISR {min_isr}, {label}, {len(lemmas)} lemmas: "
                  f"{out.result} ({out.notes[0]}) in {time.perf_counter() - start:.0f} s "
                  f"({time.process_time() - cpu:.0f} s CPU)"
                  + (f"; first CTI at {cti.action} {cti.args}, breaks "
                     f"{', '.join(cti.violated)}, {cti.classification}"
                     + (f" ({len(cti.trace)}-step run)" if cti.trace else "") if cti else ""))
            for v in out.actions:
                if v.verdict != "inductive":
                    print(f"  {v.action}: {v.verdict} {', '.join(v.violated)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--b7", action="store_true",
                        help="also BMC for B7 in hw-truncation at the CLI's defaults (minutes)")
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--b1", action="store_true",
                        help="also BMC for B1 in hw-truncation, every write flushed (minutes)")
    parser.add_argument("--buggy", action="store_true",
                        help="also the default-lemma induction of each buggy variant (minutes)")
    parser.add_argument("--snapshots", type=int, metavar="BROKERS",
                        help="also B11's fix with the snapshot layer at BROKERS (minutes)")
    parser.add_argument("--delivered", type=int, metavar="BROKERS",
                        help="also B11's fix with the snapshot and delivered layers, the "
                        "delivery invariants among the targets, at BROKERS (minutes)")
    parser.add_argument("--guards", action="store_true",
                        help="also each guard of current taken out of the 2-broker proof of "
                        "B11's fix, the proof's lemmas kept (an hour)")
    parser.add_argument("--b8", action="store_true",
                        help="also BMC for B8 (min ISR 2, ELR off) beside the explorer")
    args = parser.parse_args()
    if args.delivered:
        fixed = b11_fixed(args.delivered)
        targets = [*TARGETS, *DELIVERY]
        row(f"induction current, B11's fix, {args.delivered} brokers, default lemmas + "
            "snapshot and delivered layers", fixed,
            [*proof_lemmas(targets, fixed), *SNAPSHOT_LAYER, *DELIVERED_LAYER], targets)
    if args.b8:
        b8 = small("current", min_insync_replicas=2, max_leader_epochs=3,
                   max_session_expiries=1)
        bmc_vs_explorer("B8 current min ISR 2", b8, 12, ["LeaderCandidatesComplete"])
        bmc_vs_explorer("B8 current min ISR 2", b8, 14, ["AckedWritesDurableKip966"])
    if args.snapshots:
        fixed = b11_fixed(args.snapshots)
        row(f"induction current, B11's fix, {args.snapshots} brokers, default lemmas + "
            "snapshot layer", fixed, [*proof_lemmas(list(TARGETS), fixed), *SNAPSHOT_LAYER])
    if args.buggy:
        buggy_inductions()
    if args.guards:
        guard_mutants()
    bmc_vs_explorer("B10 current acks=1", small("current", acks="1"), 6)
    if args.b1:
        bmc_vs_explorer("B1 hw-truncation, flush every write",
                        small("hw-truncation", log_flush_interval_messages=1), 13)
    if args.b7:
        bmc_vs_explorer("B7 hw-truncation (isrlab prove --bmc defaults)",
                        small("hw-truncation", max_session_expiries=1), 12)
    config = Config(brokers=3)
    proved = ["HighWatermarkBelowLogEnd", "SingleLeaderPerEpoch", "LeaderInIsr"]
    lemmas = proof_lemmas(proved)
    start, cpu = time.perf_counter(), time.process_time()
    proof = induction(config, proved, list(lemmas), classify=False)
    print(f"induction current 3 brokers, {', '.join(proved)} + {len(lemmas)} history lemmas: "
          f"{proof.result} ({proof.notes[0]}) in {time.perf_counter() - start:.1f} s "
          f"({time.process_time() - cpu:.1f} s CPU)")
    # The default lemmas at 3 brokers (pinned at 2 brokers in tests/test_prove.py), on current
    # and on current with B11's fix (docs/protocol.md): the data invariants are false in the
    # first, so only the second could ever be proved.
    fixed = config.replace(variant=VARIANTS["current"].with_rules(
        missed_epoch_resets_followers=True))
    for what, lemmas, on in (("structural lemmas", list(STRUCTURE), config),
                             ("default lemmas", proof_lemmas(list(TARGETS)), config),
                             ("default lemmas, B11's fix", proof_lemmas(list(TARGETS), fixed),
                              fixed)):
        row(f"induction current 3 brokers, {what}", on, lemmas)
    differential(args.pairs)


# What the delivered layer proves besides the default targets.
DELIVERY = ["AckedWritesDurable", "ConsumerNeverSeesUncommitted"]


def row(what: str, config: Config, lemmas: list[str], targets=TARGETS) -> None:
    """One induction (of the default targets unless given): verdict, time, CPU, the steps
    not inductive."""
    start, cpu = time.perf_counter(), time.process_time()
    out = induction(config, list(targets), list(dict.fromkeys(lemmas)), classify=False)
    slowest = max(out.queries, key=lambda q: q.seconds)
    verdicts = [v.verdict for v in out.actions]
    print(f"{what}: {out.result} ({out.notes[0]}; "
          f"{verdicts.count('cti')} CTIs, {verdicts.count('unknown')} unknown) in "
          f"{time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s CPU) "
          f"over {len(out.queries)} queries (slowest {slowest.name} "
          f"{slowest.seconds:.2f} s)"
          + (f"; CTI at {out.cti.action}, breaks {', '.join(out.cti.violated)}"
             if out.cti else ""))
    print("  not inductive: " + (", ".join(
        f"{v.action} {v.verdict}" for v in out.actions if v.verdict != "inductive") or "none"))


if __name__ == "__main__":
    main()
