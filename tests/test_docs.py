"""docs/protocol.md's bug catalogue: every `isrlab check` command it prints reports what the page
says it reports (the invariant and the number of steps), so the page cannot drift from the model.

A claim is a ```sh block inside a `### Bn:` section followed, in the same section, by
"<Invariant> after <N> steps". `printf '...' > FILE` lines in the block write FILE first.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from isrlab.cli import main

PAGE = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"


@dataclass(frozen=True)
class Claim:
    section: str  # "B7"
    argv: tuple[str, ...]  # after "isrlab"
    files: tuple[tuple[str, str], ...]  # (name, text) written before the run
    invariant: str
    steps: int


def claims(text: str) -> list[Claim]:
    """Every (command, expected invariant and steps) pair of the catalogue."""
    found = []
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    for section in sections:
        name = section.split(":", 1)[0]
        for block, after in re.findall(r"```sh\n(.*?)```(.*?)(?=```sh|\Z)", section, re.S):
            expected = re.search(r"\b([A-Z]\w+) after (\d+) steps", after)
            files, argv = [], None
            for line in block.splitlines():
                words = shlex.split(line)
                if words[:1] == ["printf"] and words[2:3] == [">"]:
                    files.append((words[3], words[1].replace("\\n", "\n")))
                elif words[:2] == ["isrlab", "check"]:
                    argv = tuple(words[1:])
            if argv and expected:
                found.append(Claim(name, argv, tuple(files), expected[1], int(expected[2])))
    return found


def outcome(claim: Claim, where: Path, capsys) -> tuple[str | None, int]:
    """Run the claim's command in `where`: (violated invariant or None, steps)."""
    for name, body in claim.files:
        (where / name).write_text(body, encoding="utf-8")
    argv = [a if not any(a == n for n, _ in claim.files) else str(where / a) for a in claim.argv]
    main([*argv, "--json"])
    result = json.loads(capsys.readouterr().out)
    violation = result.get("violation") or {}
    return violation.get("invariant"), result["depth"]


def test_the_catalogue_has_a_check_command_for_the_bugs_the_explorer_finds():
    assert {c.section for c in claims(PAGE.read_text(encoding="utf-8"))} == {
        "B1", "B2", "B3", "B5", "B6", "B7", "B8", "B9", "B10"}


def test_every_check_command_of_the_catalogue_reports_what_the_page_says(tmp_path, capsys):
    for claim in claims(PAGE.read_text(encoding="utf-8")):
        assert outcome(claim, tmp_path, capsys) == (claim.invariant, claim.steps), claim


def test_a_page_that_misstates_a_count_is_caught(tmp_path, capsys):
    text = PAGE.read_text(encoding="utf-8")
    b10 = text.index("### B10:")
    wrong = text[:b10] + text[b10:].replace("AckedWritesDurable after 4 steps",
                                            "AckedWritesDurable after 5 steps", 1)
    (claim,) = [c for c in claims(wrong) if c.section == "B10"]
    assert claim.steps == 5
    assert outcome(claim, tmp_path, capsys) == ("AckedWritesDurable", 4) != (
        claim.invariant, claim.steps)
