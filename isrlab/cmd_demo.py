"""`isrlab demo`: the README's main job, on embedded defaults, in a few minutes.

1. The spec: the B1 transcript (HW truncation loses a committed record), and the explorer's
   shortest counterexample for `hw-truncation` next to a clean result for `current`.
2. The reference broker: a campaign of simulated runs under crashes, partitions, pauses and slow
   links for three configurations (Kafka's safe one and two unsafe ones), every run replayed
   against the spec and its client history checked.
3. A seeded implementation bug, caught by replay, with the report a developer gets.
4. Spark: the corpus of runs analysed for durability and availability, with a report of tables
   and plots.

Everything is written under ./isrlab-demo/ (the corpus, the report, the failing run).
"""

from __future__ import annotations

import errno
import shutil
import sys
import time
from pathlib import Path

from isrlab.options import OutputError, output_dir, shown_path

ROOT = Path(__file__).resolve().parent.parent
B1 = ROOT / "tests" / "testdata" / "b1_hw_truncation.txt"
OUT = Path("isrlab-demo")

# (name, cluster settings, first seed): distinct seed ranges keep run ids unique in the corpus.
CONFIGS = (
    ("safe-current-acks-all", dict(variant="current", acks="all", min_insync_replicas=2), 1),
    ("unsafe-acks-1-unclean", dict(variant="kip-320", acks="1", min_insync_replicas=1,
                                   unclean_leader_election_enable=True), 1001),
    ("unsafe-hw-truncation", dict(variant="hw-truncation", acks="all", min_insync_replicas=1,
                                  log_flush_interval_messages=1), 2001),
)
RUNS = 12
DURATION_MS = 20_000
FAULTS = ("crash", "partition", "pause", "slow")
# "What if every ISR replica fails?": each election policy under the isr-kill nemeses.
POLICY_RUNS = 6
POLICY_FAULTS = ("isr-kill", "isr-kill-all")
POLICY_FIRST_SEED = 3001


def _banner(text: str) -> None:
    print()
    print("=" * len(text))
    print(text)
    print("=" * len(text), flush=True)


def _spec_part() -> None:
    from model_check.explore.flat import search
    from model_check.explore.model import KafkaModel
    from model_check.explore.report import counterexample_table, summary
    from model_check.explore.scenario import run_file
    from spec import VARIANTS, Config

    _banner("1/4  The spec: B1 in a transcript, and the explorer on hw-truncation vs current")
    if B1.exists():
        result = run_file(B1)
        for line in B1.read_text(encoding="utf-8").splitlines():
            if line.startswith(("config ", "VIOLATED")):
                print("  " + line)
        status = "matches" if not result.mismatches else "DIFFERS"
        print(f"  transcript {B1.relative_to(ROOT)}: {result.blocks} blocks, {status}")
    bounds = dict(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1)
    for name in ("hw-truncation", "current"):
        config = Config(variant=VARIANTS[name], **bounds)
        model, result = KafkaModel(config), search(config)
        if result.violation:
            print(counterexample_table(model, result))
        print(summary(model, name, result).split("\ncoverage")[0])
        print()


def _campaign_part() -> Path:
    from impl.config import ClusterConfig
    from impl.sim import SimOptions
    from model_check.conformance.campaign import format_summary, run_campaign
    from model_check.explore.progress import Progress, campaign_progress

    _banner(f"2/4  Reference broker: {RUNS} simulated runs x {len(CONFIGS)} configurations, "
            "each replayed against the spec")
    corpus = OUT / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    for name, settings, seed in CONFIGS:
        config = ClusterConfig(**settings)
        options = SimOptions(seed=seed, duration_ms=DURATION_MS, nemesis=FAULTS, max_faults=2)
        print(f"\n  {name}: seeds {seed}..{seed + RUNS - 1}, {DURATION_MS // 1000} s each, "
              f"nemesis {','.join(FAULTS)} (2 at once)", flush=True)
        with Progress("runs", total=RUNS) as progress:
            result = run_campaign(config, options, RUNS, corpus / name, keep="all",
                                  progress=campaign_progress(progress))
        print(format_summary(result))
    from model_check.conformance.policies import POLICIES

    print(f"\n  every ISR replica killed ({','.join(POLICY_FAULTS)}), {POLICY_RUNS} runs per "
          f"election policy:", flush=True)
    for i, (policy, changes) in enumerate(POLICIES.items()):
        seed = POLICY_FIRST_SEED + i * 100
        config = ClusterConfig(**changes)
        options = SimOptions(seed=seed, duration_ms=DURATION_MS, nemesis=POLICY_FAULTS)
        with Progress("runs", total=POLICY_RUNS) as progress:
            result = run_campaign(config, options, POLICY_RUNS, corpus / f"policy-{policy}",
                                  keep="all", progress=campaign_progress(progress))
        s = result.summary()
        print(f"    {policy}: acknowledged writes lost {s['acked_writes_lost']} of "
              f"{s['acked_writes']}, {s['offline_ms'] / 1000:.1f} s without a live leader, "
              f"divergences {s['divergences']}", flush=True)
    return corpus


def _mutant_part() -> None:
    from impl.config import ClusterConfig
    from impl.sim import SimOptions
    from model_check.conformance.campaign import run_campaign

    _banner("3/4  A seeded bug (followers truncate to their HW), caught by trace replay")
    config = ClusterConfig(bugs=frozenset({"truncate-to-hw"}))
    options = SimOptions(seed=1, duration_ms=DURATION_MS, nemesis=FAULTS)
    result = run_campaign(config, options, 20, OUT / "mutant", keep="failing",
                          stop_at_first_failure=True, workers=1)
    failed = result.failed
    if not failed:
        print("  not caught in 20 runs (the campaign test checks up to 200)")
        return
    print(f"  caught in run {len(result.outcomes)} (seed {failed[0].seed}):")
    for line in failed[0].report.splitlines()[:6]:
        print("  " + line)
    print(f"  traces kept in {OUT / 'mutant'}/run-{failed[0].seed}/")


def _spark_part(corpus: Path) -> int:
    _banner("4/4  Spark: durability and availability per configuration")
    try:
        from pyspark_harness.main import main as analyze
    except ImportError as error:  # pragma: no cover - pyspark is a dependency
        print(f"  Spark analysis unavailable: {error}")
        return 1
    report = OUT / "report"
    dirs = [str(corpus / name) for name, _, _ in CONFIGS]
    from model_check.explore.progress import Progress

    code = analyze([*dirs, "--runs-from", "campaign", "--out", str(report),
                    "--master", "local[2]"], progress=Progress)
    if code == 0:
        print(f"\n  report: {report / 'index.html'} (one self-contained page; the same as "
              f"{report / 'index.md'}, tables as CSV and Parquet, plots as PNG)")
    return code


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job on embedded defaults",
                       description=__doc__.splitlines()[0])
    p.set_defaults(func=run, error_prefix="isrlab demo")


# Failures of the place written to, not of the demo: one line, not a traceback.
_STORAGE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


def run(args) -> int:
    output_dir(f"./{OUT}", str(OUT.absolute()))
    try:
        return _run()
    except OSError as error:
        if error.errno not in _STORAGE_ERRORS:
            raise
        where = shown_path(str(error.filename or OUT))
        raise OutputError(f"./{OUT}: cannot write {where}: {error.strerror}") from None


def _run() -> int:
    start = time.perf_counter()
    OUT.mkdir(exist_ok=True)
    _spec_part()
    corpus = _campaign_part()
    _mutant_part()
    code = _spark_part(corpus)
    print(f"\ndemo finished in {time.perf_counter() - start:.0f} s; everything is in {OUT}/",
          file=sys.stdout)
    return code
