"""The conformance suite against the reference broker and Apache Kafka in one run: a table of
each step's answer on both and whether they agree.

    .venv/bin/python bench/conformance_bench.py [--targets reference,kafka] [--out DIR]

Apache Kafka starts first (its JVMs take the longest), then the reference cluster; both are
asked ApiVersions, and the suite runs on each in turn at the highest version of each API that
the suite and both targets serve (model_check/conformance/wire_suite.py). Each cluster is
`--brokers 3 --partitions 1 --min-isr 3`, stopped with SIGTERM when its suite is done. The
table is printed last, then the details (absolute offsets and epochs) of every step that
differs. Exit 0 when the suite ran on every target, whatever the answers; 2 when it could not.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_check.conformance.wire_suite import (  # noqa: E402
    API_NAMES,
    TARGETS,
    ConformanceError,
    Session,
    cluster,
    common_versions,
    differences,
    run_suite,
    table,
)


def _targets(text: str) -> tuple[str, ...]:
    names = tuple(t for t in text.split(",") if t)
    bad = [t for t in names if t not in TARGETS]
    if bad or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of "
                                         f"{', '.join(TARGETS)} (each once)")
    return names


def served(target) -> dict[int, tuple[int, int]]:
    session = Session(target.bootstrap, target.topic)
    try:
        return session.api_versions()
    except OSError as error:
        raise ConformanceError(f"{target.name}: ApiVersions: {error}") from None
    finally:
        session.close()


def suite(target, versions: dict[int, int], answers: dict, seconds: dict) -> None:
    started = time.monotonic()
    answers[target.name] = run_suite(target.bootstrap, target.topic, target.control, versions)
    seconds[target.name] = time.monotonic() - started


def run(targets: tuple[str, ...], out: Path) -> tuple[dict, dict, dict]:
    """(answers, seconds, versions): each target's answers and its suite's seconds."""
    answers: dict[str, list] = {}
    seconds: dict[str, float] = {}
    if len(targets) == 1:
        with cluster(targets[0], out / targets[0]) as only:
            versions = common_versions(served(only))
            suite(only, versions, answers, seconds)
        return answers, seconds, versions
    # Kafka's JVMs start first; the reference's suite runs and its cluster stops before
    # Kafka's suite runs, so the two overlap only while the reference is asked.
    with cluster("kafka", out / "kafka") as kafka:
        with cluster("reference", out / "reference") as reference:
            versions = common_versions(served(reference), served(kafka))
            suite(reference, versions, answers, seconds)
        suite(kafka, versions, answers, seconds)
    return answers, seconds, versions


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", type=_targets, default=TARGETS,
                   help="comma-separated: reference, kafka (default both)")
    p.add_argument("--out", type=Path, default=None,
                   help="where the run directories go (default: a temporary directory)")
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="isrlab-conformance-"))
    names = tuple(t for t in TARGETS if t in args.targets)
    try:
        answers, seconds, versions = run(names, out)
    except ConformanceError as error:
        print(f"conformance_bench: {error}", file=sys.stderr)
        return 2
    print("versions: " + ", ".join(f"{API_NAMES[k]} v{v}" for k, v in sorted(versions.items())))
    for name in names:
        print(f"{name}: {len(answers[name])} answers in {seconds[name]:.1f} s (run directory "
              f"{out / name})")
    print()
    print(table({name: answers[name] for name in names}))
    if len(names) == 2:
        left, right = answers[names[0]], answers[names[1]]
        detail = {n: {a.step: a.detail for a in answers[n]} for n in names}
        differing = differences(left, right)
        print(f"\n{len(differing)} of {len(left)} steps differ" + (":" if differing else ""))
        for step, _, _ in differing:
            print(f"  {step}: " + "; ".join(f"{n}: {detail[n].get(step) or '-'}"
                                            for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
