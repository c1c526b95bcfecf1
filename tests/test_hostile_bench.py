"""bench/hostile_bench.py run as its users run it: the file and flag section passes row by row,
and a bad option is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "hostile_bench.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=120)


def test_the_files_section_prints_six_passing_rows():
    done = bench("--only", "files", "--seed", "3")
    rows = [line for line in done.stdout.splitlines() if line.startswith("files ")]
    assert len(rows) == 6, done.stdout
    assert all(row.endswith("| PASS") for row in rows), done.stdout
    assert "seed 3" in done.stdout and "CPU" in done.stdout
    assert done.returncode == 0, done.stderr


def test_an_unknown_section_is_one_line_and_exit_2():
    done = bench("--only", "replay,nope")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "nope" in done.stderr
