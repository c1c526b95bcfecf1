"""Every figure the docs print for an `isrlab check` command is what the command computes.

A claim is a ```sh block holding one `isrlab check` command (`printf '...' > FILE` lines in the
block write FILE first) and the first sentence after the block, which states the result:
"<Invariant> after <N> steps (<S> states)" for a violation (its depth is N), or
"... holds (<S> states, depth <D>)" for a search that ends clean. The test runs the command and
compares the invariant, the steps (or depth) and the distinct states with the sentence.

Every other "<S> states" figure of docs/protocol.md must name, in its own sentence, the test or
bench that pins it (`tests/....py`, `bench/....py`), and that file must hold the same number
(and the same depth, written "<S>, <D>", when the sentence gives one): explorations too long
for `make test` are checked by `python bench/exhaustive_bench.py`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from isrlab.cli import main

ROOT = Path(__file__).resolve().parent.parent
# The pages with `isrlab check` blocks: the catalogue and the prover's page.
PAGES = ("docs/protocol.md", "docs/prove.md")
# Claims above this many states run as `slow` (make test still runs them).
SLOW_STATES = 200_000

FIGURE = r"\d{1,3}(?:,\d{3})+|\d+"


@dataclass(frozen=True)
class Claim:
    page: str
    section: str  # "B7"
    argv: tuple[str, ...]  # after "isrlab"
    files: tuple[tuple[str, str], ...]  # (name, text) written before the run
    invariant: str | None  # None: the search ends clean
    depth: int | None  # the steps of a violation, the depth of a clean search
    states: int | None

    def expected(self) -> tuple[str | None, int | None, int | None]:
        return self.invariant, self.depth, self.states


def number(text: str) -> int:
    return int(text.replace(",", ""))


def sections(text: str) -> list[tuple[str, str]]:
    """(title up to its first colon, body) of every `##`/`###` section."""
    parts = re.split(r"^#{2,3} ", text, flags=re.M)[1:]
    return [(p.split("\n", 1)[0].split(":", 1)[0], p) for p in parts]


def first_sentence(text: str) -> str:
    paragraph = text.strip().split("\n\n", 1)[0]
    return re.split(r"\.(?:\s|$)", paragraph, maxsplit=1)[0]


def claims(text: str, page: str = "docs/protocol.md") -> list[Claim]:
    """Every (command, expected result) pair of a page, in order."""
    found = []
    for name, body in sections(text):
        for block, after in re.findall(r"```sh\n(.*?)```(.*?)(?=```sh|\Z)", body, re.S):
            files, commands = [], []
            for line in block.splitlines():
                line = line.strip()
                if not line.startswith(("printf ", "isrlab check ")):
                    continue
                words = shlex.split(line)
                if words[:1] == ["printf"] and words[2:3] == [">"]:
                    files.append((words[3], words[1].replace("\\n", "\n")))
                elif words[:2] == ["isrlab", "check"]:
                    commands.append(tuple(words[1:]))
            if not commands:
                continue
            assert len(commands) == 1, f"{page} {name}: one `isrlab check` per block: {block}"
            sentence = " ".join(first_sentence(after).split())
            violation = re.search(r"\b([A-Z]\w+) after (\d+) steps", sentence)
            states = re.search(rf"\b({FIGURE}) states\b", sentence)
            depth = re.search(r"\bdepth (\d+)\b", sentence)
            found.append(Claim(
                page, name, commands[0], tuple(files),
                violation[1] if violation else None,
                int(violation[2]) if violation else int(depth[1]) if depth else None,
                number(states[1]) if states else None))
    return found


def every_claim() -> list[Claim]:
    return [c for page in PAGES for c in claims((ROOT / page).read_text(encoding="utf-8"), page)]


def outcome(claim: Claim, where: Path, capsys) -> tuple[str | None, int, int]:
    """Run the claim's command in `where`: (violated invariant or None, depth, states)."""
    for name, body in claim.files:
        (where / name).write_text(body, encoding="utf-8")
    argv = [a if not any(a == n for n, _ in claim.files) else str(where / a) for a in claim.argv]
    capsys.readouterr()
    main([*argv, "--json"])
    result = json.loads(capsys.readouterr().out)
    violation = result.get("violation") or {}
    return violation.get("invariant"), result["depth"], result["distinct_states"]


def _param(claim: Claim):
    slow = (claim.states or 0) > SLOW_STATES
    return pytest.param(claim, id=f"{claim.section}:{' '.join(claim.argv[1:])}"[:90],
                        marks=[pytest.mark.slow] if slow else [])


def test_the_catalogue_has_a_check_command_for_the_bugs_the_explorer_finds():
    assert {c.section for c in claims((ROOT / PAGES[0]).read_text(encoding="utf-8"))} >= {
        "B1", "B2", "B3", "B5", "B6", "B7", "B8", "B9", "B10"}


def test_every_check_command_states_its_result_in_full():
    """A command whose sentence gives no states (or no verdict, or no depth) is not checked."""
    incomplete = [c for c in every_claim() if None in (c.depth, c.states)]
    assert not incomplete, incomplete


@pytest.mark.parametrize("claim", [_param(c) for c in every_claim()])
def test_every_check_command_reports_what_the_page_says(claim, tmp_path, capsys):
    assert outcome(claim, tmp_path, capsys) == claim.expected(), claim


@dataclass(frozen=True)
class Comment:
    """An `isrlab check` line of another page's block whose comment gives a figure."""

    page: str
    argv: tuple[str, ...]
    depth: int | None  # "N steps": a violation after N steps
    clean: bool  # "clean": no violation


def comment_claims(text: str, page: str) -> list[Comment]:
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command, _, comment = line.strip().partition("  # ")
            if not command.startswith("isrlab check ") or not comment:
                continue
            argv = tuple(w for w in shlex.split(command)[1:] if w != "--drive")
            steps = re.search(r"\b(\d+) steps\b", comment)
            clean = re.search(r"\bclean\b", comment) is not None
            if steps or clean:
                found.append(Comment(page, argv, int(steps[1]) if steps else None, clean))
    return found


def other_pages() -> list[Path]:
    return sorted(set((ROOT / "docs").glob("*.md")) - {ROOT / p for p in PAGES})


def every_comment() -> list[Comment]:
    return [c for p in other_pages() for c in comment_claims(p.read_text(encoding="utf-8"),
                                                              f"docs/{p.name}")]


@pytest.mark.parametrize("comment", [pytest.param(c, id=f"{c.page}:{' '.join(c.argv[1:])}"[:90])
                                     for c in every_comment()])
def test_every_figure_in_another_pages_command_comment_is_right(comment, tmp_path, capsys):
    """A command another page prints with "N steps" or "clean" beside it: the same command in
    the catalogue must say the same (it is checked there), or it runs here."""
    same = [c for c in every_claim() if c.argv == comment.argv]
    if same:
        got = same[0].invariant, same[0].depth
    else:
        claim = Claim(comment.page, "", comment.argv, (), None, None, None)
        got = outcome(claim, tmp_path, capsys)[:2]
    assert (got[0] is None) == comment.clean, (comment, got)
    if comment.depth is not None:
        assert got[1] == comment.depth, (comment, got)


def test_the_command_comments_of_other_pages_are_found():
    assert other_pages()
    text = "```sh\nisrlab check --variant kip-320 --brokers 2  # B7, 12 steps\n" \
           "isrlab check --elr --drive  # KIP-966: clean, ~80 s\nisrlab check --json  # no figure\n```"
    assert comment_claims(text, "x") == [
        Comment("x", ("check", "--variant", "kip-320", "--brokers", "2"), 12, False),
        Comment("x", ("check", "--elr"), None, True)]


def pinned_figures(text: str) -> list[tuple[str, int, int | None, str]]:
    """(page sentence, states, depth or None, file named) of every states figure outside a
    claim's sentence; the file is None where the sentence names none."""
    claimed = set()
    for _name, body in sections(text):
        for after in re.findall(r"```sh\n.*?```(.*?)(?=```sh|\Z)", body, re.S):
            claimed.add(" ".join(first_sentence(after).split()))
    found = []
    prose = re.sub(r"```.*?```", "\n\n", text, flags=re.S)
    for sentence in re.split(r"\.(?:\s|$)|\n\s*\n", prose):
        sentence = " ".join(sentence.split())
        if sentence in claimed:
            continue
        for states in re.finditer(rf"\b({FIGURE}) states\b", sentence):
            rest = sentence[states.end():].split(")", 1)[0]
            depth = re.match(r",? depth (\d+)", rest) or re.search(
                rf"(\d+) (?:more )?steps[ ,(]+{re.escape(states[1])} states", sentence)
            source = re.search(r"\b((?:tests|bench)/\w+\.py)\b", sentence)
            found.append((sentence, number(states[1]), int(depth[1]) if depth else None,
                          source[1] if source else None))
    return found


def pinned_in(path: str, states: int, depth: int | None) -> bool:
    text = (ROOT / path).read_text(encoding="utf-8")
    spellings = {str(states), f"{states:_}", f"{states:,}"}
    if depth is None:
        return any(re.search(rf"\b{re.escape(s)}\b", text) for s in spellings)
    return any(re.search(rf"\b{re.escape(s)}, {depth}\b", text) for s in spellings)


def test_every_other_states_figure_is_pinned_where_the_page_says():
    text = (ROOT / PAGES[0]).read_text(encoding="utf-8")
    unpinned = [(sentence, states, depth, source)
                for sentence, states, depth, source in pinned_figures(text)
                if source is None or not pinned_in(source, states, depth)]
    assert not unpinned, unpinned


def test_a_page_that_misstates_a_count_is_caught(tmp_path, capsys):
    text = (ROOT / PAGES[0]).read_text(encoding="utf-8")
    b10 = text.index("### B10:")
    wrong = text[:b10] + text[b10:].replace("AckedWritesDurable after 4 steps",
                                            "AckedWritesDurable after 5 steps", 1)
    (claim,) = [c for c in claims(wrong) if c.section == "B10"]
    assert claim.depth == 5
    assert outcome(claim, tmp_path, capsys)[:2] == ("AckedWritesDurable", 4)
    assert outcome(claim, tmp_path, capsys) != claim.expected()


def test_a_page_that_misstates_a_states_figure_is_caught(tmp_path, capsys):
    text = (ROOT / PAGES[0]).read_text(encoding="utf-8")
    (b10,) = [c for c in claims(text) if c.section == "B10"]
    wrong = text.replace(f"({b10.states:,} states", f"({b10.states + 1:,} states", 1)
    (claim,) = [c for c in claims(wrong) if c.section == "B10"]
    assert claim.states == b10.states + 1
    assert outcome(claim, tmp_path, capsys) != claim.expected()


def test_a_figure_its_pin_does_not_hold_is_caught():
    text = "Clean at these bounds (20,808 states, `tests/test_rediscovery.py`).\n"
    ((_, states, _, source),) = pinned_figures(text)
    assert (states, source) == (20808, "tests/test_rediscovery.py")
    assert not pinned_in(source, states, None) and pinned_in(source, 20809, None)
