"""Hostile files and flags through the real CLI: every refusal is one stderr line and a
non-zero exit, before any work, and never a traceback, a hang or unbounded memory.

Each case runs `python -m isrlab` in a subprocess under a timeout, so that a hang fails the
case rather than the suite: a config that is /dev/zero, a FIFO or a huge file; an integer
outside Kafka's ConfigDef type of its key; an output path under /proc, on a device or on a
directory; integer flags out of range; an option named by a spelling the user did not type.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from isrlab.options import (
    OutputError,
    input_problem,
    output_dir_problem,
    output_file_problem,
    write_output,
)
from vocab.config import KEYS, TYPE_RANGES, ConfigType, Kind

ROOT = Path(__file__).resolve().parent.parent
INT_MAX = TYPE_RANGES[ConfigType.INT][1]
LONG_MAX = TYPE_RANGES[ConfigType.LONG][1]


def isrlab(*argv: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "isrlab", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def refused(done: subprocess.CompletedProcess, code: int = 2) -> str:
    """The one stderr line of a refused command (asserting there is exactly one)."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


# Config files -----------------------------------------------------------------------------------

# A command that reads a config of each layer, with flags that keep an accepted run short.
MODEL_RUN = ("check", "--max-states", "1", "--quiet")


def cluster_run(tmp_path: Path) -> tuple[str, ...]:
    return ("cluster", "sim", "--duration", "1ms", "--trace-out", str(tmp_path / "run"))


@pytest.mark.parametrize("command", ["check", "prove", "fuzz", "cluster"])
def test_a_config_that_is_dev_zero_is_refused_at_once(command, tmp_path):
    argv = {"check": MODEL_RUN, "prove": ("prove", "--bmc", "1"), "fuzz": ("fuzz",),
            "cluster": cluster_run(tmp_path)}[command]
    line = refused(isrlab(*argv, "--config", "/dev/zero", timeout=30))
    assert "argument --config: '/dev/zero' is a character device, not a regular file" in line


def test_a_config_that_is_a_fifo_is_refused_without_blocking(fifo, tmp_path):
    for argv in (MODEL_RUN, cluster_run(tmp_path)):
        line = refused(isrlab(*argv, "--config", fifo, timeout=30))
        assert line.endswith(f"argument --config: '{fifo}' is a FIFO, not a regular file")


def test_a_config_that_is_a_directory_is_refused(tmp_path):
    line = refused(isrlab(*MODEL_RUN, "--config", tmp_path, timeout=30))
    assert line.endswith(f"argument --config: '{tmp_path}' is a directory, not a regular file")


def test_a_huge_config_is_refused_by_its_size_without_reading_it(tmp_path):
    path = tmp_path / "huge.properties"
    with open(path, "wb") as f:
        f.truncate(8 << 30)  # sparse: 8 GiB that take no disk
    line = refused(isrlab(*MODEL_RUN, "--config", path, timeout=30))
    assert f"argument --config: '{path}' is {8 << 30} bytes, more than the 1048576" in line


def test_the_config_reader_itself_refuses_a_fifo_and_a_device(fifo):
    # Commands that read a config named elsewhere (a campaign's, a run's) go through it too.
    code = ("import sys\nfrom vocab.properties import PropertiesError, load_pairs\n"
            "for path in sys.argv[1:]:\n"
            "    try:\n        load_pairs(path)\n"
            "    except PropertiesError as error:\n        print(error)\n")
    done = subprocess.run([sys.executable, "-c", code, str(fifo), "/dev/zero"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.splitlines() == [f"{fifo}: a FIFO, not a config file",
                                        "/dev/zero: a character device, not a config file"]


def test_a_long_value_in_an_int_key_is_refused_naming_file_line_and_key(tmp_path):
    path = tmp_path / "c.properties"
    path.write_text("# fetches\nreplica.fetch.wait.max.ms=99999999999999999\n")
    line = refused(isrlab(*cluster_run(tmp_path), "--config", path))
    assert line == (f"isrlab cluster: error: {path}:2: replica.fetch.wait.max.ms: "
                    f"'99999999999999999' does not fit Kafka's INT type "
                    f"(-2147483648..2147483647)")


def _integer_keys(type_: ConfigType):
    """(key, command) for every integer key of that type, once per layer that reads it."""
    for key in KEYS:
        if key.kind in (Kind.INT, Kind.OPTIONAL_INT) and key.type is type_:
            if key.model:
                yield pytest.param(key.name, "model", id=f"{key.name}-model")
            if key.cluster:
                yield pytest.param(key.name, "cluster", id=f"{key.name}-cluster")


def _run_with(tmp_path: Path, layer: str, name: str, value: int) -> subprocess.CompletedProcess:
    path = tmp_path / "c.properties"
    path.write_text(f"{name}={value}\n")
    argv = MODEL_RUN if layer == "model" else cluster_run(tmp_path)
    return isrlab(*argv, "--config", path)


@pytest.mark.parametrize(("name", "layer"), list(_integer_keys(ConfigType.INT)))
def test_every_int_key_refuses_2_to_the_31(tmp_path, name, layer):
    line = refused(_run_with(tmp_path, layer, name, INT_MAX + 1))
    assert f"c.properties:1: {name}: '2147483648' does not fit Kafka's INT type" in line


@pytest.mark.parametrize(("name", "layer"), list(_integer_keys(ConfigType.INT)))
def test_every_int_key_takes_2_to_the_31_minus_1_unless_its_own_range_refuses(
        tmp_path, name, layer):
    done = _run_with(tmp_path, layer, name, INT_MAX)
    assert "Traceback" not in done.stderr
    if done.returncode == 2:  # the key's own range (or a rule with another key) refuses
        line = refused(done)
        assert "c.properties:1: " in line and ": must " in line and "INT type" not in line
        assert name in line
    else:  # accepted: the run went ahead (stopped at --max-states for the model: exit 3)
        assert done.returncode in (0, 3), done.stderr


@pytest.mark.parametrize(("name", "layer"), list(_integer_keys(ConfigType.LONG)))
def test_every_long_key_refuses_2_to_the_63(tmp_path, name, layer):
    line = refused(_run_with(tmp_path, layer, name, LONG_MAX + 1))
    assert f"c.properties:1: {name}: '9223372036854775808' does not fit Kafka's LONG type" in line


def test_every_integer_key_has_a_java_type():
    assert {key.type for key in KEYS if key.kind in (Kind.INT, Kind.OPTIONAL_INT)} <= set(ConfigType)
    assert all(key.type is ConfigType.LONG for key in KEYS if key.bound)


# Input files of other flags ---------------------------------------------------------------------


def test_a_scenario_file_that_is_a_fifo_or_a_device_is_refused(fifo):
    for path in (fifo, "/dev/zero"):
        line = refused(isrlab("scenario", path, timeout=30))
        assert line.startswith(f"{path}:0: a ") and line.endswith(", not a transcript")


def test_a_lemmas_file_that_is_a_fifo_or_a_device_is_refused(fifo):
    for path, what in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
        line = refused(isrlab("prove", "--induction", "--lemmas-file", path, timeout=30))
        assert line.endswith(f"argument --lemmas-file: '{path}' is {what}, not a regular file")


def test_analyze_refuses_a_fifo_among_its_traces_before_spark_starts(fifo, tmp_path):
    line = refused(isrlab("analyze", fifo, "--out", tmp_path / "report", timeout=60))
    assert line == f"isrlab analyze: error: TRACES: '{fifo}' is a FIFO, not a trace file or directory"


# Output paths -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["check", "--html", "/proc/x"], "--html: '/proc/x' is under /proc"),
    (["check", "--junit", "/proc/version"], "--junit: '/proc/version' is under /proc"),
    (["check", "--itf", "/dev/full"],
     "--itf: '/dev/full' is a character device, not a regular file"),
    (["check", "--mermaid", "/sys/x"], "--mermaid: '/sys/x' is under /sys"),
    (["check", "--junit", "/tmp"], "--junit: '/tmp' is a directory"),
    (["fuzz", "--out", "/proc/x"], "--out: '/proc/x' is under /proc"),
    (["fuzz", "--out", "/dev/full"], "--out: '/dev/full' is a character device"),
    (["prove", "--induction", "--houdini", "--save-lemmas", "/dev/full"],
     "--save-lemmas: '/dev/full' is a character device"),
    (["cluster", "sim", "--trace-out", "/proc/x"],
     "--trace-out: '/proc/x' is under /proc, not a place for a directory"),
    (["replay", "/nonexistent", "--html", "/proc/version"],
     "--html: '/proc/version' is under /proc"),
    (["analyze", "/tmp", "--out", "/proc/x"], "--out: '/proc/x' is under /proc"),
])
def test_an_output_path_that_cannot_be_written_is_refused_before_the_work(argv, message):
    line = refused(isrlab(*argv, timeout=30))
    assert message in line


def test_fuzz_refuses_its_default_output_in_a_place_it_cannot_write(tmp_path):
    (tmp_path / "fuzz-counterexample.txt").mkdir()
    line = refused(isrlab("fuzz", "--examples", "1", cwd=tmp_path, timeout=30))
    assert line.endswith(f"--out: '{tmp_path / 'fuzz-counterexample.txt'}' is a directory")


def test_demo_refuses_to_write_under_proc_before_the_work():
    line = refused(isrlab("demo", cwd=Path("/proc"), timeout=30))
    assert line == "isrlab demo: error: ./isrlab-demo: '/proc/isrlab-demo' is under /proc, " \
                   "not a place for a directory"


def test_the_path_checks_name_what_is_wrong(tmp_path, fifo):
    assert input_problem("/proc/version") is None  # a regular (if empty-sized) file
    assert input_problem(str(fifo)) == f"'{fifo}' is a FIFO, not a regular file"
    assert output_file_problem(str(tmp_path / "new.html")) is None
    assert output_file_problem(str(fifo)) == f"'{fifo}' is a FIFO, not a regular file"
    assert output_file_problem(str(tmp_path / "no" / "x")) == f"'{tmp_path / 'no'}' is not a directory"
    assert output_dir_problem(str(tmp_path / "a" / "b")) is None
    assert output_dir_problem("/dev/null") == "'/dev/null' exists and is not a directory"


def test_write_output_turns_a_full_device_into_one_line():
    with pytest.raises(OutputError) as caught:
        write_output("--html", "/dev/full", "x" * 100_000)
    assert str(caught.value) == "--html: cannot write '/dev/full': No space left on device"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_half_one(tmp_path, monkeypatch):
    import isrlab.options

    path = tmp_path / "report.xml"
    path.write_text("old")

    def full_disk(dir, prefix):  # a temporary file on a disk with no room left
        return os.open("/dev/full", os.O_WRONLY), str(tmp_path / ".isrlab-tmp")

    monkeypatch.setattr(isrlab.options.tempfile, "mkstemp", full_disk)
    with pytest.raises(OutputError, match="No space left on device"):
        write_output("--junit", str(path), "new" * 10_000)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]


def test_check_prints_its_result_before_a_failed_write_ends_it(tmp_path, monkeypatch, capsys):
    import isrlab.options
    from isrlab.cli import main

    def full_disk(dir, prefix):
        return os.open("/dev/full", os.O_WRONLY), str(tmp_path / ".isrlab-tmp")

    monkeypatch.setattr(isrlab.options.tempfile, "mkstemp", full_disk)
    code = main(["check", "--variant", "hw-truncation", "--brokers", "2", "--records", "1",
                 "--crashes", "1", "--quiet", "--junit", str(tmp_path / "r.xml")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "VIOLATED" in out or "violated" in out.lower()
    assert err.splitlines() == [f"isrlab check: error: --junit: cannot write "
                                f"'{tmp_path / 'r.xml'}': No space left on device"]


# Integer flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["check", "--depth", "-1"], "argument --depth: -1 is out of range (1..1000000)"),
    (["check", "--seed", str(LONG_MAX + 1)],
     f"argument --seed: {LONG_MAX + 1} is out of range (0..{LONG_MAX})"),
    (["prove", "--bmc", "1", "--seed", str(LONG_MAX + 1)],
     f"argument --seed: {LONG_MAX + 1} is out of range (0..{LONG_MAX})"),
    (["check", "--max-states", str(LONG_MAX + 1)],
     f"argument --max-states: {LONG_MAX + 1} is out of range (<= {LONG_MAX})"),
    (["coverage", "--runs", "9" * 5000], "argument --runs: '999999999"),
    (["check", "--max-depth", "0"], "argument --max-depth: 0 is out of range (>= 1)"),
    (["prove", "--bmc", "-1"], "argument --bmc: -1 is out of range (0..1000)"),
    (["fuzz", "--steps", "100001"], "argument --steps: 100001 is out of range (1..100000)"),
    (["coverage", "--duration=-5s"], "argument --duration: bad duration '-5s'"),
    (["coverage", "--depth", "13"], "argument --depth: 13 is out of range (1..12)"),
])
def test_an_integer_flag_out_of_range_is_one_line(argv, message):
    line = refused(isrlab(*argv, timeout=30))
    assert message in line


# One name per option ----------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "named"), [("--trace-out", "--trace-out"), ("--out", "--out")])
def test_an_option_with_two_spellings_is_named_as_typed(typed, named):
    line = refused(isrlab("cluster", "kafka", typed, "", timeout=30))
    assert line == f"isrlab cluster kafka: error: argument {named}: an empty path"


def test_an_abbreviated_option_is_refused(tmp_path):
    # `--port` once started a cluster as `--port-base`: every flag is spelt out.
    line = refused(isrlab("cluster", "sim", "--trace-out", str(tmp_path / "run"), "--port", "2000",
                          timeout=30))
    assert line == "isrlab: error: unrecognized arguments: --port 2000"


def test_a_missing_option_with_two_spellings_is_named_once():
    line = refused(isrlab("cluster", "kafka", timeout=30))
    assert line == "isrlab cluster kafka: error: the following arguments are required: --out"


@pytest.mark.parametrize(("argv", "message"), [
    (["check", "--min-isr", "5"],
     "isrlab check: error: --min-isr: min.insync.replicas: must be between 1 and the number "
     "of brokers (3)"),
    (["coverage", "--variant", "nope"], "isrlab coverage: error: --variant: unknown variant"),
    (["coverage", "--brokers", "2", "--min-isr", "3"],
     "isrlab coverage: error: --min-isr: min.insync.replicas: must be between 1"),
])
def test_a_value_the_config_refuses_is_named_by_its_flag(argv, message):
    assert refused(isrlab(*argv, timeout=30)).startswith(message)


def test_a_scenario_rewrite_that_cannot_be_written_keeps_the_transcript(tmp_path, monkeypatch,
                                                                         capsys):
    import isrlab.options
    from isrlab.cli import main

    path = tmp_path / "t.txt"
    text = (ROOT / "tests" / "testdata" / "b1_hw_truncation.txt").read_text()
    corrupted = text.replace("VIOLATED", "VIOLATED?", 1)
    path.write_text(corrupted)

    def full_disk(dir, prefix):
        return os.open("/dev/full", os.O_WRONLY), str(tmp_path / ".isrlab-tmp")

    monkeypatch.setattr(isrlab.options.tempfile, "mkstemp", full_disk)
    assert main(["scenario", "--rewrite", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"isrlab scenario: error: FILE: cannot write '{path}': No space left on device"]
    assert path.read_text() == corrupted


def test_the_port_helpers_name_the_flag_they_are_given():
    import argparse

    from isrlab.options import UsageError, port, port_span

    assert port("0") == 0 and port("1024") == 1024 and port("65535") == 65535
    for text in ("80", "65536", "+2000", " 2000", "2_000", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            port(text)
    port_span("--port-base", 65533, 3)
    with pytest.raises(UsageError, match=r"^--port-base: 65534 \+ 3 ports runs past 65535"):
        port_span("--port-base", 65534, 3)


def test_a_huge_lemmas_file_or_transcript_is_refused_by_its_size(tmp_path):
    path = tmp_path / "huge"
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # sparse
    line = refused(isrlab("prove", "--induction", "--lemmas-file", path, timeout=30))
    assert line.endswith(f"argument --lemmas-file: '{path}' is {1 << 30} bytes, more than "
                         f"the {16 << 20} this reads")
    line = refused(isrlab("scenario", path, timeout=30))
    assert line == f"{path}:0: {1 << 30} bytes, more than the {16 << 20} a transcript may have"
