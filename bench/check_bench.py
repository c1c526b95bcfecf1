"""Benchmark of the explorer: prints its figures and, where TLC is available, the ratio to TLC.

    python bench/check_bench.py            # tla-compat Kip320 + default model: the flat
                                           # encoding beside the spec's states, workers 1 and 2,
                                           # partial-order reduction (--por), the whole
                                           # current 3/2/2 graph (the issue's target)
    python bench/check_bench.py --whole-spec  # also that graph on the spec's states (~200 s)
    python bench/check_bench.py --million  # also a one-million-state run of the default model
    python bench/check_bench.py --pair  # only the hw-truncation / kip-320 pair at 3/2/3, 2 workers
    python bench/check_bench.py --memory  # bytes per state: tla-compat Kip320 3/2/2/3, symmetry
    python bench/check_bench.py --side-by-side  # the whole current 3/2/2 graph, the flat
                                           # encoding as Python and compiled, in two processes
                                           # at once (each sees the same load)
    TLA2TOOLS_JAR=/tmp/tlc/tla2tools.jar KAFKA_SPEC_DIR=/tmp/tlc python bench/check_bench.py

TLC is never part of this repository. To compare, point TLA2TOOLS_JAR at a tla2tools.jar and
KAFKA_SPEC_DIR at a directory with hachikuji/kafka-specification's modules; TLC then runs on
Kip320 with the same constants (no symmetry, one worker) in the same invocation, and the ratio
of distinct states per second is printed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model_check.explore import compiled  # noqa: E402
from model_check.explore import flat as python_flat  # noqa: E402
from model_check.explore.explorer import explore  # noqa: E402
from model_check.explore.flat import FlatKafkaModel  # noqa: E402
from model_check.explore.model import KafkaModel  # noqa: E402
from model_check.explore.tla_compat import TlaCompatModel  # noqa: E402
from model_check.prove.por import Reduction  # noqa: E402
from spec import VARIANTS, Config  # noqa: E402

TLA_CONSTANTS = dict(brokers=3, log_size=2, records=2, epochs=2)
KAFKA_CONFIG = Config(variant=VARIANTS["current"], brokers=2, max_records=2, max_leader_epochs=3,
                      max_crashes=1)
# The default model's speed target: current, 3 brokers, 2 records, 2 epochs, whole graph.
TARGET = Config(variant=VARIANTS["current"], brokers=3, max_records=2, max_leader_epochs=2)


def line(name: str, result, extra: str = "") -> None:
    print(f"{name:<46} {result.result:<10} {result.distinct_states:>10,} distinct "
          f"{result.seconds:>8.2f} s {result.states_per_second:>10,.0f} states/s {extra}")


def run_tlc(jar: str, spec_dir: str) -> tuple[int, float] | None:
    """TLC on Kip320 with TLA_CONSTANTS: (distinct states, seconds), or None if it fails."""
    cfg = (
        "CONSTANTS\n    Replicas = {r1, r2, r3}\n    LogSize = 2\n    MaxRecords = 2\n"
        "    MaxLeaderEpoch = 2\nINIT Init\nNEXT Next\nINVARIANTS WeakIsr StrongIsr\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for tla in Path(spec_dir).glob("*.tla"):
            (Path(tmp) / tla.name).write_text(tla.read_text())
        (Path(tmp) / "Kip320.cfg").write_text(cfg)
        start = time.perf_counter()
        proc = subprocess.run(
            ["java", "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC", "-workers", "1", "-deadlock",
             "-metadir", str(Path(tmp) / "states"), "-config", "Kip320.cfg", "Kip320.tla"],
            cwd=tmp, capture_output=True, text=True, check=False,
        )
        seconds = time.perf_counter() - start
    found = re.findall(r"([\d,]+) distinct states found", proc.stdout)
    if not found:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        return None
    return int(found[-1].replace(",", "")), seconds  # the last line is the final count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--million", action="store_true",
                        help="also explore one million states of the default model, 1 and 2 workers")
    parser.add_argument("--pair", action="store_true",
                        help="only the pair that separates a broken and a fixed variant: "
                        "hw-truncation and kip-320 at 3 brokers, "
                        "2 records, 3 epochs, 2 workers (kip-320 explores 3.5M states)")
    parser.add_argument("--memory", action="store_true",
                        help="only the memory figure: peak RSS growth and stored bytes per state "
                        "on tla-compat Kip320 3/2/2/3 with symmetry (1,665,204 states), one "
                        "worker, in a fresh process")
    parser.add_argument("--whole-spec", action="store_true",
                        help="also search the whole current 3/2/2 graph on the spec's own "
                        "states (about 200 s), beside the flat encoding's")
    parser.add_argument("--side-by-side", action="store_true",
                        help="only the whole current 3/2/2 graph, the flat encoding as Python "
                        "and compiled, in two processes at once")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--whole-child", choices=("python", "compiled"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        return memory_child()
    if args.whole_child:
        return whole_child(args.whole_child)
    if args.side_by_side:
        return side_by_side()
    built = compiled.load()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; compiled flat encoding: "
          f"{compiled.state()}, explorer loop: {compiled.state(explorer=True)} "
          "(`make install` builds them)")
    if args.pair:
        return pair()
    if args.memory:
        return subprocess.run([sys.executable, __file__, "--memory-child"], check=False).returncode

    tla = TlaCompatModel("kip-320", **TLA_CONSTANTS)
    one = explore(tla, symmetry=False, workers=1)
    line("tla-compat Kip320 3/2/2/2, workers 1", one)
    two = explore(tla, symmetry=False, workers=2)
    line("tla-compat Kip320 3/2/2/2, workers 2", two, f"speed-up {one.seconds / two.seconds:.2f}x")
    sym = explore(tla, workers=1)
    line("tla-compat Kip320 3/2/2/2, symmetry, workers 1", sym)
    assert one.distinct_states == two.distinct_states == 737_794, "TLC finds 737,794"

    jar, spec_dir = os.environ.get("TLA2TOOLS_JAR"), os.environ.get("KAFKA_SPEC_DIR")
    if jar and spec_dir:
        tlc = run_tlc(jar, spec_dir)
        if tlc:
            distinct, seconds = tlc
            rate = distinct / seconds
            print(f"{'TLC Kip320 3/2/2/2, 1 worker (same run)':<46} {'':<10} {distinct:>10,} distinct "
                  f"{seconds:>8.2f} s {rate:>10,.0f} states/s")
            print(f"isrlab / TLC distinct states per second, one core: "
                  f"{one.states_per_second / rate:.1f}x")
    else:
        print("TLC: not run (set TLA2TOOLS_JAR and KAFKA_SPEC_DIR to compare side by side)")

    b1 = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1, max_leader_epochs=2,
                max_crashes=1)
    result = explore(KafkaModel(b1))
    line("kafka hw-truncation 2 brokers, shortest cex", result,
         f"{result.violation.invariant} in {len(result.violation.trace) - 1} steps")
    b1_3 = Config(variant=VARIANTS["hw-truncation"], brokers=3, max_records=2, max_leader_epochs=3)
    runs = [("spec states", KafkaModel, False, 1), ("spec states, POR", KafkaModel, True, 1),
            ("flat", FlatKafkaModel, False, 1), ("flat, workers 2", FlatKafkaModel, False, 2)]
    if built is not None:
        runs += [("compiled", built.FlatKafkaModel, False, 1),
                 ("compiled, workers 2", built.FlatKafkaModel, False, 2),
                 ("compiled, workers auto (isrlab check's default)", built.FlatKafkaModel,
                  False, "auto")]
    b1_seconds = {}
    for name, make, reduce, workers in runs:
        cpu = time.process_time()
        result = explore(make(b1_3), max_states=2_000_000, workers=workers,
                         reduction=Reduction(b1_3) if reduce else None)
        b1_seconds[name] = result.seconds
        extra = (f"{result.violation.invariant} in {len(result.violation.trace) - 1} steps"
                 if result.violation else "")
        line(f"kafka hw-truncation 3 brokers (B1), {name}", result,
             f"{extra}, {result.generated_states:,} generated, cpu {time.process_time() - cpu:.1f} s"
             " (this process)")
    print(f"B1 at 3 brokers: flat / spec states {b1_seconds['spec states'] / b1_seconds['flat']:.2f}x"
          " faster, one worker each")

    size = 300_000
    spec = explore(KafkaModel(TARGET), max_states=size)
    line(f"kafka current 3/2/2, first {size:,} states, spec", spec)
    flat = explore(FlatKafkaModel(TARGET), max_states=size)
    line(f"kafka current 3/2/2, first {size:,} states, flat", flat,
         f"{spec.seconds / flat.seconds:.2f}x; generated {flat.generated_states:,} "
         f"(spec {spec.generated_states:,})")
    if built is not None:
        fast = explore(built.FlatKafkaModel(TARGET), max_states=size)
        line(f"kafka current 3/2/2, first {size:,} states, compiled", fast,
             f"{flat.seconds / fast.seconds:.2f}x the flat encoding as Python")
    whole = whole_graph(built or python_flat, "flat, compiled" if built else "flat")
    if args.whole_spec:
        spec = explore(KafkaModel(TARGET))
        line("kafka current 3/2/2, whole graph, spec states", spec,
             f"flat {spec.seconds / whole.seconds:.2f}x faster")

    size = 150_000
    one = explore(KafkaModel(KAFKA_CONFIG), max_states=size, workers=1, check_invariants=True)
    line(f"kafka current 2/2/3/crash 1, {size:,} states, w1", one)
    por = explore(KafkaModel(KAFKA_CONFIG), max_states=size, reduction=Reduction(KAFKA_CONFIG))
    line(f"kafka current 2/2/3/crash 1, {size:,} states, POR", por,
         f"speed-up {one.seconds / por.seconds:.2f}x, generated {one.generated_states:,} -> "
         f"{por.generated_states:,}")
    two = explore(KafkaModel(KAFKA_CONFIG), max_states=size, workers=2, check_invariants=True)
    line(f"kafka current 2/2/3/crash 1, {size:,} states, w2", two,
         f"speed-up {one.seconds / two.seconds:.2f}x")
    if args.million:
        size = 1_000_000
        one = explore(KafkaModel(KAFKA_CONFIG), max_states=size, workers=1)
        line(f"kafka current, {size:,} states, workers 1", one)
        two = explore(KafkaModel(KAFKA_CONFIG), max_states=size, workers=2)
        line(f"kafka current, {size:,} states, workers 2", two,
             f"speed-up {one.seconds / two.seconds:.2f}x")
    return 0


def memory_child() -> int:
    import resource

    model = TlaCompatModel("kip-320", brokers=3, log_size=2, records=2, epochs=3)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cpu = time.process_time()
    result = explore(model, symmetry=True, workers=1)
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n = result.distinct_states
    line("tla-compat Kip320 3/2/2/3, symmetry, workers 1", result, f"cpu {cpu:.1f} s")
    print(f"  peak RSS {peak / 2**20:.0f} MiB, {base / 2**20:.0f} MiB before the search: "
          f"{(peak - base) / n:.0f} bytes per state at the peak (frontier included)")
    print(f"  visited set + parent tree: {result.stored_bytes / n:.1f} bytes per state")
    assert n == 1_665_204, n
    return 0


def whole_graph(module, name: str):
    """The whole TARGET graph on `module`'s FlatKafkaModel (flat, or the compiled one)."""
    cpu = time.process_time()
    result = explore(module.FlatKafkaModel(TARGET))
    line(f"kafka current 3/2/2, whole graph, {name}", result,
         f"depth {result.depth}, {result.generated_states:,} generated, "
         f"cpu {time.process_time() - cpu:.1f} s (target: 40,000 states/s)")
    assert result.distinct_states == 2_031_731, result.distinct_states
    return result


def whole_child(which: str) -> int:
    module = compiled.load() if which == "compiled" else python_flat
    if module is None:
        print(f"compiled flat encoding: {compiled.state()} (`make install` builds it)")
        return 1
    whole_graph(module, which)
    return 0


def side_by_side() -> int:
    """The whole target graph as Python and compiled, in two processes started together."""
    children = [subprocess.Popen([sys.executable, __file__, "--whole-child", which])
                for which in ("python", "compiled")]
    return max(child.wait() for child in children)


def pair() -> int:
    """`isrlab check --variant V --brokers 3 --records 2 --epochs 3 --workers 2` for both V."""
    for variant, expect in (("hw-truncation", "violation"), ("kip-320", "ok")):
        config = Config(variant=VARIANTS[variant], brokers=3, max_records=2, max_leader_epochs=3)
        result = explore(KafkaModel(config), workers=2)
        extra = (f"{result.violation.invariant} in {len(result.violation.trace) - 1} steps"
                 if result.violation else f"depth {result.depth}")
        line(f"kafka {variant} 3/2/3, workers 2", result, extra)
        assert result.result == expect, f"{variant}: expected {expect}, got {result.result}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
