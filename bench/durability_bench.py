"""One table, three columns: what the model says, what the reference broker's campaign
measured, and what Apache Kafka's campaign measured, for each durability configuration.

    .venv/bin/python bench/durability_bench.py [--runs-reference 50] [--runs-kafka 50]
        [--rows 1,2,...] [--no-model] [--no-kafka] [--json FILE]

Per row:
- model: `isrlab check` at 2 brokers, 2 records (and the row's crash bound), checking the
  row's invariant: holds within the bounds (states explored) or violated (the depth of the
  shortest counterexample).
- reference: `isrlab campaign` in the simulator (the reference broker's code under virtual
  time; 20 s runs), acknowledged writes lost, duplicates, other anomalies, offline seconds.
- kafka: `isrlab campaign --target kafka --runs-per-cluster 10` (a 3-node KRaft cluster per
  10 runs, each run on a topic of its own, confluent-kafka sending --count records spread
  over 10 s while the nemesis runs through the batch), the same counts from the client
  histories, and the seconds in which writes were sent and none was acknowledged.

The faults are the same by name, not in effect, and the table says where that matters: the
simulator's `crash` is a power loss (unflushed records are gone), Kafka's is SIGKILL (the OS
keeps what the JVM wrote, so nothing is lost without `log.flush.interval.messages`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISRLAB = [sys.executable, "-m", "isrlab.cli"]

# (name, model flags, invariant, reference campaign flags, kafka campaign flags)
ROWS = (
    ("acks=1, leader cut off", "--acks 1 --min-isr 1", "AckedWritesDurable",
     "--acks 1 --min-isr 1 --nemesis partition", "--acks 1 --min-isr 1 --nemesis partition"),
    ("acks=all, min ISR 1, crash/pause/partition", "--acks all --min-isr 1 --crashes 1",
     "AckedWritesDurable", "--acks all --min-isr 1 --nemesis crash,pause,partition",
     "--acks all --min-isr 1 --nemesis crash,pause,partition"),
    ("acks=all, min ISR 2, crash/pause/partition", "--acks all --min-isr 2 --crashes 1",
     "AckedWritesDurable", "--acks all --min-isr 2 --nemesis crash,pause,partition",
     "--acks all --min-isr 2 --nemesis crash,pause,partition"),
    ("unclean election on, all-ISR kill", "--acks all --min-isr 1 --unclean --crashes 1",
     "AckedWritesDurable", "--acks all --min-isr 1 --unclean --nemesis isr-kill-all",
     "--acks all --min-isr 1 --unclean --nemesis isr-kill-all"),
    ("KIP-966 on, last ISR member shut down uncleanly",
     "--acks all --min-isr 2 --elr --crashes 1", "AckedWritesDurableKip966",
     "--acks all --min-isr 2 --elr --nemesis isr-kill",
     "--acks all --min-isr 2 --elr --nemesis isr-kill-all"),
    ("KIP-966 off, last ISR member shut down uncleanly",
     "--acks all --min-isr 2 --no-elr --crashes 1", "AckedWritesDurableKip966",
     "--acks all --min-isr 2 --no-elr --nemesis isr-kill",
     "--acks all --min-isr 2 --no-elr --nemesis isr-kill-all"),
)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def model(flags: str, invariant: str) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([*ISRLAB, "check", "--brokers", "2", "--records", "2", *flags.split(),
                           "--invariant", invariant, "--json"], capture_output=True, text=True,
                          env=_env())
    seconds = time.perf_counter() - t0
    try:
        body = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"verdict": f"error: {(done.stderr.strip().splitlines() or ['?'])[-1]}"}
    if body.get("result") == "ok":
        verdict = f"holds ({body.get('distinct_states', body.get('states', '?')):,} states)"
    else:
        steps = len(body.get("violation", {}).get("trace", [])) - 1  # the first is the start
        verdict = f"violated ({steps} steps)"
    return {"verdict": verdict, "seconds": round(seconds, 1), "result": body.get("result")}


def reference(flags: str, runs: int) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([*ISRLAB, "campaign", "--runs", str(runs), "--keep", "none",
                           "--json", *flags.split()], capture_output=True, text=True,
                          env=_env())
    try:
        s = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    a = s["anomalies"]
    return {"runs": s["runs"], "acked": s["acked_writes"], "lost": s["acked_writes_lost"],
            "lost_excused": s["acked_writes_lost_excused"], "duplicates": a["duplicate"],
            "other": {k: v for k, v in a.items() if v and k not in ("lost-write", "duplicate")},
            "offline_s": round(s["offline_ms"] / 1000, 1),
            "seconds": round(time.perf_counter() - t0, 1)}


def kafka(flags: str, runs: int, count: int) -> dict:
    from apache_kafka.run import KAFKA_NEMESIS

    parts = flags.split()
    k = parts.index("--nemesis") + 1
    kinds = parts[k].split(",")
    skipped = [x for x in kinds if x not in KAFKA_NEMESIS]
    kept = [x for x in kinds if x in KAFKA_NEMESIS]
    if not kept:
        return {"error": f"{','.join(skipped)} is not run on Apache Kafka here"}
    parts[k] = ",".join(kept)
    out = Path(tempfile.mkdtemp(prefix="isrlab-durability-kafka-"))
    t0 = time.perf_counter()
    try:
        subprocess.run([*ISRLAB, "campaign", "--target", "kafka", "--runs", str(runs),
                        "--runs-per-cluster", "10", "--count", str(count), "--duration", "10s",
                        "--out", str(out), *parts], capture_output=True, text=True,
                       env=_env())
        body = json.loads((out / "campaign.json").read_text())
    except (OSError, ValueError) as error:
        return {"error": str(error)}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    t = body["totals"]
    other: dict[str, int] = {}
    for r in body["results"]:
        for kind, n in r.get("history", {}).get("anomalies", {}).items():
            if n and kind not in ("lost-write", "duplicate"):
                other[kind] = other.get(kind, 0) + n
    return {"runs": runs, "acked": t["acked"], "lost": t["lost"], "duplicates": t["duplicates"],
            "other": other, "unavailable_s": t["unavailable_s"],
            "failed_to_run": sum(1 for r in body["results"] if "error" in r),
            "nemesis": ",".join(kept), "not_run": skipped,
            "seconds": round(time.perf_counter() - t0, 1)}


def _cell(r: dict | None, time_key: str) -> str:
    if r is None:
        return "not run"
    if "error" in r:
        return r["error"]
    other = ", ".join(f"{k} {v}" for k, v in sorted(r["other"].items())) or "none"
    text = (f"{r['lost']:,} of {r['acked']:,} acked lost, {r['duplicates']:,} dup, other: "
            f"{other}; {r[time_key]} s {'offline' if time_key == 'offline_s' else 'unavailable'}"
            f" ({r['runs']} runs)")
    if r.get("not_run"):
        text += f" [without {','.join(r['not_run'])}]"
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs-reference", type=int, default=50)
    p.add_argument("--runs-kafka", type=int, default=50)
    p.add_argument("--count", type=int, default=300, help="records per Kafka run")
    p.add_argument("--rows", default=",".join(str(i + 1) for i in range(len(ROWS))))
    p.add_argument("--no-model", dest="model", action="store_false")
    p.add_argument("--no-kafka", dest="kafka", action="store_false")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = p.parse_args()
    rows = [ROWS[int(i) - 1] for i in args.rows.split(",")]
    print(f"durability: model at 2 brokers / 2 records; reference: {args.runs_reference} "
          f"simulated runs of 20 s; Apache Kafka: {args.runs_kafka} runs of 10 s, "
          f"{args.count} records each; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores", flush=True)
    cpu0 = os.times()
    wall0 = time.perf_counter()
    table = []
    for name, model_flags, invariant, ref_flags, kafka_flags in rows:
        row = {"configuration": name, "invariant": invariant,
               "model": model(model_flags, invariant) if args.model else None,
               "reference": reference(ref_flags, args.runs_reference),
               "kafka": kafka(kafka_flags, args.runs_kafka, args.count) if args.kafka
               else None}
        table.append(row)
        print(f"| {name} | {invariant}: {(row['model'] or {}).get('verdict', 'not run')} | "
              f"{_cell(row['reference'], 'offline_s')} | {_cell(row['kafka'], 'unavailable_s')}"
              " |", flush=True)
    cpu1 = os.times()
    cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system -
                                                       cpu0.children_system)
    print(f"wall {time.perf_counter() - wall0:.0f} s, CPU of the runs {cpu:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
