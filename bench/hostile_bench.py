"""Every hostile input and peer attack of the catalogue, replayed: one verdict row per case.

    .venv/bin/python bench/hostile_bench.py [--only replay,peers,door,files] [--seed 1]
        [--quick] [--seconds 10]

Sections:
- replay: each kind of `model_check.conformance.corrupt.KINDS` applied to a simulated run (the
  pieces of bench/corruption_bench.py); a planted bug's run whose headers claim the spec rule
  it breaks off; run.json deleted; a trace file that is a FIFO, a /dev/zero symlink or a 2 GiB
  sparse file; `--html` aimed at /proc and /dev/full.
- peers: an `isrlab cluster tcp` run on loopback, attacked while it runs by strangers (spoofed
  hellos, a forged FetchResponse as b0, a forged LeaderAndIsr as meta, a 30,000-deep JSON frame
  to every port), and watched for its key in any node's /proc environ or cmdline.
- door: the Kafka-port attacks of bench/kafka_attacks.py, each beside an acks=all producer.
- files: bad config files, flags and output paths given to `python -m isrlab`.

Each row says what must happen and what did; the exit code is 1 if any row FAILs. Every CLI
case runs in a subprocess under a timeout, since a hang is a finding too. Reproduce a row with
the printed seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for where in (REPO, REPO / "bench"):
    sys.path.insert(0, str(where))

import corruption_bench  # noqa: E402
import kafka_attacks  # noqa: E402

from impl.config import ClusterConfig  # noqa: E402
from impl.kafka import replication  # noqa: E402
from impl.protocol.messages import FetchResponse, LeaderAndIsr  # noqa: E402
from impl.sim import SimOptions, simulate  # noqa: E402
from impl.tcp import framing  # noqa: E402
from model_check.conformance.corrupt import KINDS, read_run, write_run  # noqa: E402

SECTIONS = ("replay", "peers", "door", "files")
CLI_TIMEOUT_S = 30
CLI_RSS_MB_MAX = 256  # a refused file must not be read into memory
DOOR_RSS_MB_MAX = 512
REFUSED = "refusing a connection from an unknown peer"


@dataclass(frozen=True)
class Row:
    """One case: what must happen, what did, and whether that is the same."""

    section: str
    case: str
    must: str
    happened: str
    ok: bool


@dataclass(frozen=True)
class Exit:
    """A finished (or killed) subprocess and what it cost."""

    code: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    rss_mb_max: float


def run(argv: list[str], timeout_s: float = CLI_TIMEOUT_S, **kwargs) -> Exit:
    """Run argv to its end or kill it at `timeout_s`; its own CPU time and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, **kwargs)
    out: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda n=n, f=f: out.__setitem__(n, f.read()))
               for n, f in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for r in readers:
        r.start()
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    # wait4, not wait: the child's own CPU time. Its ru_maxrss would count this process's RSS
    # at the fork, so the peak is the child's own VmHWM, read until it ends.
    hwm_kb = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        hwm_kb = max(hwm_kb, _vm_hwm_kb(proc.pid))
        time.sleep(0.01)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    return Exit(None if killed.is_set() else proc.returncode,
                out["stdout"].decode(errors="replace"), out["stderr"].decode(errors="replace"),
                time.perf_counter() - start, usage.ru_utime + usage.ru_stime, hwm_kb / 1024)


def _vm_hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass  # ended meanwhile
    return 0


def isrlab(*args: str, timeout_s: float = CLI_TIMEOUT_S) -> Exit:
    return run([sys.executable, "-m", "isrlab", *map(str, args)], timeout_s)


def refused_in_one_line(e: Exit) -> tuple[str, bool]:
    """Whether a CLI run refused its input as bad user input must be refused: a non-zero exit
    within the timeout, one line on stderr, no traceback, bounded memory."""
    lines = [line for line in e.stderr.splitlines() if line.strip()]
    if e.code is None:
        return f"still running after {CLI_TIMEOUT_S} s: killed", False
    said = lines[0][:110] if lines else "(nothing on stderr)"
    ok = (e.code != 0 and len(lines) == 1 and "Traceback" not in e.stderr
          and e.rss_mb_max < CLI_RSS_MB_MAX)
    return (f"exit {e.code}, {len(lines)} stderr line(s) in {e.wall_s:.1f} s, "
            f"{e.rss_mb_max:.0f} MB: {said}"), ok


# replay ----------------------------------------------------------------------------------------


def _sim_run(config: ClusterConfig, seed: int, duration_ms: int, nemesis, run_dir: Path):
    result = simulate(config, SimOptions(seed=seed, duration_ms=duration_ms, nemesis=nemesis,
                                         max_faults=2))
    result.write(run_dir)
    return run_dir


def _claim_rules_off(run_dir: Path, rules: list[str]) -> None:
    """Every header and run.json say the run was made with `rules` of the spec off."""
    for path in sorted(run_dir.glob("*.ndjson")):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        header["config"]["spec_rules_off"] = rules
        lines[0] = json.dumps(header, sort_keys=True)
        path.write_text("\n".join(lines) + "\n")
    run_json = json.loads((run_dir / "run.json").read_text())
    run_json["config"]["spec_rules_off"] = rules
    (run_dir / "run.json").write_text(json.dumps(run_json, sort_keys=True) + "\n")


def replay_section(seed: int, quick: bool, root: Path) -> list[Row]:
    rows: list[Row] = []
    s = "replay"
    clean = _sim_run(ClusterConfig(), seed, 6_000, ("crash", "partition"), root / "clean")
    files = read_run(clean)
    code, text = corruption_bench.replay(files, root / "check")
    rows.append(Row(s, f"clean sim run, seed {seed} (control)", "accepted",
                    f"exit {code}", code == 0))
    if code != 0:
        return rows  # every corruption below would be judged against a run already rejected
    cases = 1 if quick else 3
    for kind in KINDS:
        verdicts: list[str] = []
        for case in range(cases):
            corrupted = kind.apply(files, random.Random(f"{seed}/{kind.name}/{case}"))
            if corrupted is None:
                verdicts.append("n/a")
                continue
            code, text = corruption_bench.replay(corrupted, root / "case")
            verdicts.append("traceback" if code is None
                            else "accepted" if code == 0 else "rejected")
        applied = [v for v in verdicts if v != "n/a"]
        want = "rejected" if kind.changes_meaning else "accepted"
        happened = ", ".join(f"{verdicts.count(v)} {v}" for v in sorted(set(verdicts)))
        rows.append(Row(s, f"corrupt: {kind.name}", f"{want}, each of {cases}",
                        happened if applied else f"not applicable to this run ({happened})",
                        bool(applied) and all(v == want for v in applied)))

    # A planted bug's run whose headers claim the rule it breaks off: judged by the full spec.
    bug_seed, bug_dir = None, root / "bug"
    for candidate in range(seed, seed + 10):
        _sim_run(ClusterConfig(variant="kip-320", bugs=frozenset({"skip-fetch-fencing"})),
                 candidate, 10_000, ("crash", "partition", "pause"), bug_dir)
        if isrlab("replay", bug_dir).code == 1:
            bug_seed = candidate
            break
    if bug_seed is None:
        rows.append(Row(s, "run claiming spec_rules_off", "rejected",
                        f"no diverging skip-fetch-fencing run in seeds {seed}..{seed + 9}",
                        False))
    else:
        _claim_rules_off(bug_dir, ["fencing"])
        e = isrlab("replay", bug_dir)
        first = (e.stdout.splitlines() or ["(no output)"])[0][:90]
        rows.append(Row(s, f"skip-fetch-fencing run (kip-320, sim seed {bug_seed}), headers "
                           "claim spec_rules_off=[fencing]", "rejected by the full spec",
                        f"exit {e.code}: {first}", e.code == 1))
        e = isrlab("replay", "--without", "fencing", bug_dir)
        rows.append(Row(s, "the same run with --without fencing (control)", "accepted",
                        f"exit {e.code}", e.code == 0))

    no_json = root / "no-run-json"
    write_run(files, no_json)
    (no_json / "run.json").unlink()
    happened, ok = refused_in_one_line(isrlab("replay", no_json))
    rows.append(Row(s, "run.json deleted", "rejected in one line", happened, ok))
    e = isrlab("replay", "--no-run-json", no_json)
    rows.append(Row(s, "run.json deleted, --no-run-json (control)", "accepted",
                    f"exit {e.code}", e.code == 0))

    def odd_b1(name: str, make) -> Path:
        d = write_run(files, root / name)
        (d / "b1.ndjson").unlink()
        make(d / "b1.ndjson")
        return d

    def sparse(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(2 << 30)

    for case, make in (("b1.ndjson a FIFO", os.mkfifo),
                       ("b1.ndjson a symlink to /dev/zero", lambda p: p.symlink_to("/dev/zero")),
                       ("b1.ndjson a 2 GiB sparse file", sparse)):
        run_dir = odd_b1(case.split()[-1].replace("/", ""), make)
        happened, ok = refused_in_one_line(isrlab("replay", run_dir))
        rows.append(Row(s, case, f"refused in one line, < {CLI_TIMEOUT_S} s, "
                                 f"< {CLI_RSS_MB_MAX} MB", happened, ok))
        (run_dir / "b1.ndjson").unlink()  # the 2 GiB file holds no blocks, but not for long
    for target in ("/proc/version", "/dev/full"):
        happened, ok = refused_in_one_line(isrlab("replay", "--html", target, clean))
        rows.append(Row(s, f"--html {target}", "refused in one line", happened, ok))
    return rows


# peers -----------------------------------------------------------------------------------------

# Starts `isrlab cluster tcp` with the run key made from the seed (argv[1]), so that the bench
# knows what to look for in /proc; the key is handed to nodes as ever, on their stdin.
KEYED_CLUSTER = """
import hashlib, sys, types
from impl.tcp import supervisor
seed = sys.argv[1]
handed = []
def token_bytes(n=32):
    handed.append(hashlib.sha256(f"hostile-bench/{seed}/{len(handed)}".encode()).digest()[:n])
    return handed[-1]
supervisor.secrets = types.SimpleNamespace(token_bytes=token_bytes,
                                           token_hex=lambda n=32: token_bytes(n).hex())
from isrlab.cli import main
code = main(sys.argv[2:])
print(f"keys handed out: {len(handed)}", file=sys.stderr)
sys.exit(code)
"""


def run_keys(seed: int, count: int = 4) -> list[bytes]:
    return [hashlib.sha256(f"hostile-bench/{seed}/{i}".encode()).digest()
            for i in range(count)]


def node_pids(run_dir: Path) -> list[int]:
    """The run's node processes: `impl.tcp.node` with `run_dir` on their command line."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue  # gone meanwhile
        if b"impl.tcp.node" in argv and str(run_dir).encode() in argv:
            pids.append(int(entry.name))
    return pids


def wait_for_ports(run_dir: Path, timeout_s: float = 30) -> dict[str, int]:
    """Every port of the run, from the `--ports` the supervisor gave its nodes, once the
    consumer's trace exists (the consumer starts last, so every listener is up)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in node_pids(run_dir):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (run_dir / "consumer.ndjson").exists() and b"--ports" in argv:
                return json.loads(argv[argv.index(b"--ports") + 1])
        time.sleep(0.05)
    raise TimeoutError(f"no run came up in {run_dir} within {timeout_s} s")


def _stranger(port: int, data: bytes, linger_s: float | None) -> None:
    """Connect and send `data`; close after `linger_s`, or once the node closes (5 s at
    most)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        if linger_s is not None:
            time.sleep(linger_s)
            return
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass  # reset with our bytes unread, or the 5 s passed


def peers_section(seed: int, quick: bool, root: Path) -> list[Row]:
    s = "peers"
    run_dir = root / "tcp"
    duration_s = 5 if quick else 8
    cmd = [sys.executable, "-c", KEYED_CLUSTER, str(seed), "cluster", "tcp", "--seed",
           str(seed), "--duration", f"{duration_s}s", "--partitions", "1",
           "--trace-out", str(run_dir)]
    result: dict = {}
    cluster = threading.Thread(target=lambda: result.update(
        exit=run(cmd, timeout_s=duration_s + 60)))
    cluster.start()
    seen: dict[int, bytes] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in node_pids(run_dir):
                try:
                    seen[pid] = (Path(f"/proc/{pid}/environ").read_bytes() + b"\0"
                                 + Path(f"/proc/{pid}/cmdline").read_bytes())
                except OSError:
                    pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    sent: dict[str, int] = {}  # forged connections per target node
    try:
        ports = wait_for_ports(run_dir)
        time.sleep(0.5)  # writes under way before the strangers come
        for claimed in ("b1", "b2"):  # b0 leads partition 0
            _stranger(ports["b0"], framing.encode_frame({"hello": claimed}), 0.01)
            sent["b0"] = sent.get("b0", 0) + 1
        forged_fetch = b"".join(framing.encode_message("b0", f"b0:m{n}", 0, FetchResponse(
            0, 0, 0, "records", records=((0, 99, b"forged"),), high_watermark=1,
            fetch_offset=0, seq=n)) for n in range(20))
        _stranger(ports["b1"], framing.encode_frame({"hello": "b0"}) + forged_fetch, None)
        forged_lai = framing.encode_message("meta", "meta:m1", 0,
                                            LeaderAndIsr(0, 1, 50, (1,), 50, 0))
        _stranger(ports["b1"], framing.encode_frame({"hello": "meta", "proof": "00" * 32})
                  + forged_lai, None)
        sent["b1"] = 2
        body = (bytes([replication.MARK]) + (60_000).to_bytes(2, "big")
                + b"[" * 30_000 + b"]" * 30_000)
        deep = framing.LENGTH.pack(len(body)) + body  # the frame as is: not valid JSON
        for node, port in sorted(ports.items()):
            _stranger(port, deep, None)
            sent[node] = sent.get(node, 0) + 1
    except Exception as error:  # noqa: BLE001 - the attack could not be made: a row says so
        sent["error"] = 1
        result["attack_error"] = f"{type(error).__name__}: {error}"
    cluster.join()
    done.set()
    watcher.join()
    e: Exit = result["exit"]
    rows: list[Row] = []
    if "attack_error" in result:
        rows.append(Row(s, "attacks made", "every forged connection sent",
                        result["attack_error"], False))
    summary = {}
    if (run_dir / "run.json").exists():
        summary = json.loads((run_dir / "run.json").read_text())["summary"]
    rows.append(Row(s, f"tcp run, seed {seed}, {duration_s} s, 1 partition",
                    "exit 0 with run.json, no traceback",
                    f"exit {e.code}, run.json {'written' if summary else 'missing'}, "
                    f"{e.wall_s:.1f} s, {e.cpu_s:.1f} s CPU (supervisor)",
                    e.code == 0 and bool(summary) and "Traceback" not in e.stderr))
    for node in sorted(n for n in sent if n != "error"):
        log = run_dir / f"{node}.log"
        if log.exists():
            text = log.read_text(errors="replace")
        else:  # the producer's and consumer's lines go to the supervisor's stderr
            text = "\n".join(line for line in e.stderr.splitlines() if node in line)
        refusals = sum(REFUSED in line for line in text.splitlines())
        what = {"b0": "2 spoofed hellos + deep frame", "b1": "forged fetch + forged "
                "LeaderAndIsr + deep frame"}.get(node, "deep frame")
        rows.append(Row(s, f"{node}: {what}", f"{sent[node]} refusal line(s), no traceback",
                        f"{refusals} refusal line(s)"
                        + (", a traceback" if "Traceback" in text else ""),
                        refusals == sent[node] and "Traceback" not in text))
    final = run_dir / "b1" / "final.json"
    if final.exists():
        p0 = json.loads(final.read_text())["partitions"]["0"]
        rows.append(Row(s, "b1's partition 0 after the forged frames",
                        "leader b0, not the forged b1 at epoch 50",
                        f"leader b{p0['leader']}, epoch {p0['leader_epoch']}",
                        p0["leader"] == 0 and p0["leader_epoch"] < 50))
    if summary:
        rows.append(Row(s, "ISR and acks=all writes under the attacks",
                        "no ISR shrink, no failed write, writes acknowledged",
                        f"{summary['isr_shrinks']} shrinks, {summary['writes_acked']} acked, "
                        f"{summary['writes_failed']} failed",
                        summary["isr_shrinks"] == 0 and summary["writes_failed"] == 0
                        and summary["writes_acked"] > 0))
        r = isrlab("replay", run_dir, timeout_s=120)
        rows.append(Row(s, "isrlab replay of the attacked run", "accepted",
                        f"exit {r.code}: {(r.stdout.splitlines() or [''])[0][:80]}",
                        r.code == 0))
    handed = [line for line in e.stderr.splitlines() if line.startswith("keys handed out")]
    keys = run_keys(seed)[:int(handed[0].split()[-1])] if handed else []
    leaks = [pid for pid, text in seen.items() for key in keys
             if key in text or key.hex().encode() in text.lower()]
    rows.append(Row(s, "the run key in /proc/PID/environ or cmdline",
                    "in no node's, every node seen",
                    f"{len(keys)} key(s), {len(seen)} node processes read, "
                    f"{len(set(leaks))} holding a key",
                    bool(keys) and len(seen) >= 4 and not leaks))
    return rows


# door ------------------------------------------------------------------------------------------


def door_section(seconds: float, root: Path) -> list[Row]:
    rows: list[Row] = []
    must = (f"every write acked, no broker fenced, leader RSS < {DOOR_RSS_MB_MAX} MB, "
            "attacker closed or refused")
    for name in kafka_attacks.ATTACKS:
        try:
            r = kafka_attacks.run_attack(name, seconds, root / "door")
        except Exception as error:  # noqa: BLE001 - the row is the finding
            rows.append(Row("door", name, must, f"{type(error).__name__}: {error}"[:160],
                            False))
            continue
        told = r["told"]
        closed = told.get("closed", 0) + told.get("closed_by_broker", 0)
        errors = sum(n for code, n in told.get("error_codes", {}).items() if int(code) != 0)
        fenced = {k: n for k, n in r["store_actions_during"].items()
                  if k in ("ControllerElectLeader", "ControllerHandleBrokerFailure",
                           "LeaderShrinkIsr")}
        # Parked long polls are Kafka's own behaviour, not a fault: they must be held and
        # answered at their max_wait, each of them, rather than refused.
        told_ok = (told.get("answers", 0) >= told.get("opened", 0) > 0
                   if name == "parked-polls" else bool(closed or errors))
        ok = (r["failed"] == 0 and r["acked"] == r["sent"] and not fenced
              and r["leader_rss_max_mb"] < DOOR_RSS_MB_MAX and told_ok
              and r["tracebacks"] == 0)
        rows.append(Row("door", f"{name} ({seconds:g} s)",
                        must.replace("attacker closed or refused", "every poll answered")
                        if name == "parked-polls" else must,
                        f"{r['acked']}/{r['sent']} acked, {r['failed']} failed, "
                        f"store: {fenced or 'no change'}, RSS {r['leader_rss_max_mb']} MB, "
                        f"{closed} closed, {errors} error answers, "
                        f"{r['tracebacks']} tracebacks; told {_counts(told)}", bool(ok)))
    return rows


def _counts(told: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(told.items()) if not isinstance(v, dict))


# files -----------------------------------------------------------------------------------------


def files_section(root: Path) -> list[Row]:
    fifo = root / "config.fifo"
    os.mkfifo(fifo)
    huge = root / "huge-wait.properties"
    huge.write_text("replica.fetch.wait.max.ms=99999999999999999\n")
    cases = [
        ("--config /dev/zero", ["cluster", "sim", "--config", "/dev/zero"]),
        ("--config a FIFO", ["cluster", "sim", "--config", fifo]),
        ("replica.fetch.wait.max.ms=99999999999999999",
         ["cluster", "sim", "--config", huge]),
        ("cluster tcp --fault past the duration",
         ["cluster", "tcp", "--duration", "2s", "--fault", "5000:crash:b1:1000"]),
        ("cluster sim --trace-out /proc/x", ["cluster", "sim", "--trace-out", "/proc/x"]),
        ("cluster tcp --trace-out /proc/x", ["cluster", "tcp", "--duration", "1s",
                                             "--trace-out", "/proc/x"]),
    ]
    rows = []
    for n, (case, args) in enumerate(cases):
        if "--trace-out" not in args:
            args = [*args, "--trace-out", root / f"files-{n}"]
        happened, ok = refused_in_one_line(isrlab(*args))
        rows.append(Row("files", case, "one stderr line, non-zero exit, no traceback",
                        happened, ok))
    return rows


# the table -------------------------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    """Columns: section, case, what must happen, what happened, verdict."""
    head = Row("section", "case", "must", "happened", True)
    cells = [(r.section, r.case, r.must, r.happened, "PASS" if r.ok else "FAIL")
             for r in (head, *rows)]
    cells[0] = (*cells[0][:4], "verdict")
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    for c in cells:
        print(" | ".join(f"{c[i]:<{widths[i]}}" for i in range(4)) + f" | {c[4]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma-separated sections ({','.join(SECTIONS)})")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true",
                   help="one case per corruption kind, shorter runs and attacks")
    p.add_argument("--seconds", type=float, default=None,
                   help="each door attack's duration (default 10, 3 with --quick)")
    args = p.parse_args(argv)
    only = args.only.split(",")
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        print(f"hostile_bench: unknown section(s) {', '.join(unknown)} "
              f"(known: {', '.join(SECTIONS)})", file=sys.stderr)
        return 2
    seconds = args.seconds if args.seconds is not None else 3.0 if args.quick else 10.0
    root = Path(tempfile.mkdtemp(prefix="hostile-"))
    print(f"hostile bench: seed {args.seed}, sections {','.join(only)}"
          f"{', quick' if args.quick else ''}; files in {root}", flush=True)
    wall, cpu = time.perf_counter(), time.process_time()
    rows: list[Row] = []
    for section in SECTIONS:
        if section not in only:
            continue
        t = time.perf_counter()
        if section == "replay":
            rows += replay_section(args.seed, args.quick, root)
        elif section == "peers":
            rows += peers_section(args.seed, args.quick, root)
        elif section == "door":
            rows += door_section(seconds, root)
        else:
            rows += files_section(root)
        print(f"  {section}: {time.perf_counter() - t:.1f} s", flush=True)
    print()
    print_table(rows)
    failed = [r for r in rows if not r.ok]
    children = os.times()
    print(f"\n{'FAILED' if failed else 'OK'}: {len(rows) - len(failed)} of {len(rows)} cases "
          f"pass; {time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s "
          f"CPU here, {children.children_user + children.children_system:.1f} s CPU in "
          f"waited subprocesses; seed {args.seed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
