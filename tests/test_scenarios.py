"""Scenario transcripts: every file under testdata matches, and the CLI's exit-code contract.

`isrlab scenario` exits 0 when every block matches, 1 with a diff when one differs, 2 with a
single `FILE:LINE: ...` line on malformed input; `--rewrite` regenerates the expectations.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from isrlab.cli import main
from model_check.explore.scenario import ScenarioError, parse, run_file, run_text

TESTDATA = Path(__file__).parent / "testdata"
# Globbed at collection time: transcripts added later are picked up on the next run.
TRANSCRIPTS = sorted(TESTDATA.glob("*.txt"))


def smallest_transcript() -> Path:
    return min(TRANSCRIPTS, key=lambda p: (p.stat().st_size, p.name))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# Every transcript matches ------------------------------------------------------------------


def test_there_are_transcripts():
    assert TRANSCRIPTS, f"no transcripts under {TESTDATA}"


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.name)
def test_transcript_matches(path):
    result = run_file(path)
    assert result.blocks > 0
    mismatches = [f"line {block.line}: {block.command}" for block, _ in result.mismatches]
    assert mismatches == []
    assert result.rewritten == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.name)
def test_transcript_starts_with_a_config_block(path):
    blocks = parse(path.read_text(encoding="utf-8"), str(path))
    assert blocks[0].command.split()[0] == "config"


# The CLI: 0 on a match ---------------------------------------------------------------------


def test_cli_exit_0_on_match(capsys):
    paths = [str(p) for p in TRANSCRIPTS]
    assert main(["scenario", *paths]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    summaries = [line for line in out.splitlines() if line.endswith(" blocks match")]
    assert len(summaries) == len(paths)
    for path, line in zip(paths, summaries, strict=True):
        assert line.startswith(f"{path}: ")
    # Every other line names an expected violation with its step.
    others = [line for line in out.splitlines() if not line.endswith(" blocks match")]
    assert all(": after `" in line and ": VIOLATED " in line for line in others)


def test_cli_names_the_b1_violation_and_its_step(capsys):
    path = str(TESTDATA / "b1_hw_truncation.txt")
    assert main(["scenario", path]) == 0
    out = capsys.readouterr().out
    assert f"{path}:255: after `become-follower broker=2`: VIOLATED NoCommittedDataLoss: " in out


def test_cli_verbose_prints_the_transcript(capsys):
    path = smallest_transcript()
    assert main(["scenario", "-v", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith(path.read_text(encoding="utf-8"))


# The CLI: 1 with a diff on a changed expectation --------------------------------------------


def corrupted_copy(tmp_path: Path) -> tuple[Path, str, int]:
    """A copy of a transcript with its first `invariants: ok` line changed."""
    source = smallest_transcript()
    path = tmp_path / source.name
    shutil.copy(source, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.strip() == "invariants: ok")
    lines[index] = "invariants: CORRUPTED\n"
    path.write_text("".join(lines), encoding="utf-8")
    return path, source.read_text(encoding="utf-8"), index + 1


def test_cli_exit_1_with_a_diff_on_a_changed_expectation(tmp_path, capsys):
    path, _, _ = corrupted_copy(tmp_path)
    assert main(["scenario", str(path)]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert "-invariants: CORRUPTED" in out.splitlines()
    assert "+invariants: ok" in out.splitlines()
    assert f"--- {path}:" in out and " expected" in out
    assert f"+++ {path}:" in out and " actual" in out
    assert out.splitlines()[-1].startswith(f"{path}: 1 of ")
    assert out.splitlines()[-1].endswith(" blocks differ")


def test_cli_exit_1_when_any_file_differs(tmp_path, capsys):
    path, _, _ = corrupted_copy(tmp_path)
    assert main(["scenario", str(smallest_transcript()), str(path)]) == 1
    out, _ = capsys.readouterr()
    assert out.splitlines()[0].endswith(" blocks match")


def test_cli_rewrite_regenerates_a_corrupted_file(tmp_path, capsys):
    path, original, _ = corrupted_copy(tmp_path)
    assert main(["scenario", "--rewrite", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert out.strip().endswith(" blocks, 1 expectations rewritten")
    assert path.read_text(encoding="utf-8") == original
    assert main(["scenario", str(path)]) == 0


def test_rewrite_fills_empty_expectations_and_keeps_comments(tmp_path, capsys):
    path = write(tmp_path, "new.txt", "# a comment\nconfig brokers=2 max.records=1\n----\n\n"
                 "produce\n----\n\n# why we check\ncheck\n----\n")
    assert main(["scenario", "--rewrite", str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# a comment\nconfig brokers=2 max.records=1\n----\n"
                           "p0 controller: leader=0 epoch=0 isr={0,1} partition_epoch=0\n")
    assert "\nproduce\n----\nProducerSend(partition=0): v1 to broker 0\n" in text
    assert "LeaderAppend(partition=0, broker=0, value=1): appended at 0\n" in text
    assert text.endswith("\n# why we check\ncheck\n----\ninvariants: ok\n")
    capsys.readouterr()
    assert main(["scenario", str(path)]) == 0


# The CLI: 2 with one line on malformed input ------------------------------------------------


MALFORMED = {
    "missing_separator": (
        "config brokers=2\nstate\n----\n",
        1, "expected '----' after the command 'config brokers=2'",
    ),
    "separator_first": ("----\nconfig brokers=2\n", 1, "'----' without a command before it"),
    "no_commands": ("# only a comment\n\n", 1, "no commands in the file"),
    "config_not_first": ("state\n----\n", 1, "the first command must be 'config ...'"),
    "unknown_command": (
        "config brokers=2\n----\n\nfrobnicate\n----\n", 4, "unknown command 'frobnicate' (known: ",
    ),
    "argument_not_integer": (
        "config brokers=2\n----\n\nleader-shrink-isr broker=zero\n----\n",
        4, "leader-shrink-isr: arguments must be integers",
    ),
    "argument_unknown": (
        "config brokers=2\n----\n\ntick partition=0\n----\n",
        4, "tick takes no argument 'partition' (takes: none)",
    ),
    "argument_without_value": (
        "config brokers=2\n----\n\nbroker-crash broker\n----\n",
        4, "expected key=value, got 'broker'",
    ),
    "fetch_without_follower": ("config brokers=2\n----\n\nfetch\n----\n", 4,
                               "fetch needs follower=F"),
    "bad_config_key": (
        "# header\nconfig brokers=2 replicas=3\n----\n", 2, "unknown key 'replicas' (known: ",
    ),
    "bad_config_value": (
        "config brokers=2 acks=most\n----\n", 1, "acks: expected 0, 1, all or -1, got 'most'",
    ),
    "config_out_of_range": (
        "config brokers=2 min.insync.replicas=3\n----\n", 1,
        "min.insync.replicas: must be between 1 and the number of brokers (2)",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_cli_exit_2_with_one_line_on_malformed_input(case, tmp_path, capsys):
    text, line, message = MALFORMED[case]
    path = write(tmp_path, f"{case}.txt", text)
    assert main(["scenario", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"{path}:{line}: {message}")
    assert "Traceback" not in err
    assert path.read_text(encoding="utf-8") == text  # never rewritten


def test_cli_exit_2_on_a_missing_file(tmp_path, capsys):
    path = tmp_path / "absent.txt"
    assert main(["scenario", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"{path}:0: cannot read: No such file or directory\n")


def test_cli_rewrite_refuses_malformed_input(tmp_path, capsys):
    text, _, _ = MALFORMED["unknown_command"]
    path = write(tmp_path, "bad.txt", text)
    assert main(["scenario", "--rewrite", str(path)]) == 2
    assert path.read_text(encoding="utf-8") == text
    capsys.readouterr()


def test_cli_usage_errors_exit_2():
    with pytest.raises(SystemExit) as info:
        main(["scenario"])
    assert info.value.code == 2
    assert main([]) == 2


# The runner's commands -----------------------------------------------------------------------


def outputs(text: str) -> list[str]:
    """The actual output of each block of a transcript (expectations left empty)."""
    result = run_text(text, "t.txt")
    return [actual for _, actual in result.mismatches]


def test_a_failed_guard_prints_not_enabled_and_changes_nothing():
    out = outputs("config brokers=2\n----\n\nleader-shrink-isr broker=0 follower=1\n----\n\n"
                  "state\n----\n")
    assert out[1] == ("LeaderShrinkIsr(partition=0, broker=0, follower=1): not enabled: "
                      "1 is not lagging")
    assert out[2] == out[0].rsplit("\n", 1)[0]  # the table, as it was after config


def test_missing_arguments_are_filled_from_the_first_enabled_candidate():
    out = outputs("config variant=current brokers=3 max.crashes=1\n----\n\n"
                  "broker-crash broker=2\n----\n\ncontroller-handle-broker-failure broker=2\n"
                  "----\n\nbecome-follower broker=1\n----\n")
    assert out[3].splitlines()[0] == (
        "BecomeFollower(partition=0, broker=1, leader_epoch=0, partition_epoch=1): "
        "follower of 0 in epoch 0"
    )


def test_nothing_to_fill_missing_arguments_from():
    out = outputs("config brokers=2\n----\n\nbecome-leader broker=0\n----\n")
    assert out[1] == ("BecomeLeader: not enabled: nothing in flight or pending to fill "
                      "leader_epoch, partition_epoch")


def test_produce_stops_at_the_first_failed_step_and_shows_the_state():
    out = outputs("config brokers=2 max.records=0\n----\n\nproduce\n----\n")
    assert out[1] == "ProducerSend(partition=0): not enabled: max.records writes sent"


def test_check_prints_one_line_per_violation():
    out = outputs("config variant=current brokers=2 acks=1 max.crashes=1\n----\n\nproduce\n----\n\n"
                  "broker-crash broker=0\n----\n\ncontroller-handle-broker-failure broker=0\n----\n\n"
                  "become-leader broker=1\n----\n\ncheck\n----\n")
    assert out[-1] == ("VIOLATED AckedWritesDurable: p0: acknowledged v1 at offset 0 (acks=1) "
                       "lost: leader 1 has nothing")
    assert out[-2].splitlines()[-1] == out[-1]


def test_parse_reports_the_line_of_each_block():
    blocks = parse("# c\nconfig brokers=2\n----\nx\ny\n\n\ntick\n----\n", "t.txt")
    assert [(b.line, b.command, b.expected) for b in blocks] == [
        (2, "config brokers=2", ("x", "y")),
        (8, "tick", ()),
    ]


def test_scenario_errors_are_value_errors_with_the_location():
    with pytest.raises(ScenarioError, match=r"^t\.txt:1: no commands in the file$"):
        parse("", "t.txt")
