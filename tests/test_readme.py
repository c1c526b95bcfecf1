"""The README is a front door: short, without dates, commit hashes or timings outside its one
figures table, every relative link resolving, and its three job examples working when pasted
into a fresh directory with the venv's `bin/` on PATH.

An example is the ```sh block right after a comment `<!-- example: NAME, exit N -->` (a
reader of the rendered page does not see it); N is the exit status the example promises. The
paths it writes (the values of `--out`, `--trace-out`, `--html`, ...) must exist after it ran.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
MAX_LINES = 150
JOBS = ("check", "cluster", "corpus")  # one example per job, in this order
FIGURES = "## Figures"
# Flags whose value is a path the command writes.
OUTPUT_FLAGS = ("--out", "--trace-out", "--html", "--mermaid", "--itf", "--junit",
                "--save-lemmas")

MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
          "December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
FORBIDDEN = {
    "a date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "a month with a year": re.compile(
        rf"\b(?:{MONTHS})\.?\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?\d{{4}}\b"
        rf"|\b\d{{1,2}}\s+(?:{MONTHS})\.?,?\s+\d{{4}}\b"),
    # 7 to 40 hex digits holding both a digit and a letter: an abbreviated or full commit.
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    "a timing": re.compile(
        r"\d(?:\.\d+)?\s*(?:min|minutes?|secs?|seconds?|hours?|h)\b(?!\s*ISR)"
        r"|\d\s*s\b(?=\s*(?:wall|CPU|each|per|here|\)|,|;|\.))|\bs wall\b|\bwall\b|\bCPU\b"),
    # The repository stands alone: no tracker numbers.
    "a tracker number": re.compile(r"(?<![\w/&])#\d+\b"),
}

EXAMPLE = re.compile(r"<!--\s*example:\s*(\w+)\s*,\s*exit\s+(\d+)\s*-->\s*\n```sh\n(.*?)```",
                     re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Example:
    name: str
    exit: int
    script: str

    def commands(self) -> list[list[str]]:
        """Each command of the script (split at `&&`, `;`, `|` and newlines) as argv."""
        words = shlex.split(self.script.replace("\\\n", " "), comments=True)
        commands, current = [], []
        for word in words:
            if word in ("&&", ";", "||", "|"):
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
        return [c for c in commands if c]

    def outputs(self) -> list[str]:
        paths = []
        for argv in self.commands():
            for flag, value in zip(argv, argv[1:], strict=False):
                if flag in OUTPUT_FLAGS:
                    paths.append(value)
            paths += [w.split("=", 1)[1] for w in argv if w.split("=", 1)[0] in OUTPUT_FLAGS
                      and "=" in w]
        return paths


def examples(text: str) -> list[Example]:
    return [Example(name, int(code), script) for name, code, script in EXAMPLE.findall(text)]


def split_figures(text: str) -> tuple[str, str]:
    """(the README without its figures section, the figures section)."""
    start = text.find("\n" + FIGURES + "\n")
    assert start >= 0, f"the README has no '{FIGURES}' section"
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    return text[:start] + text[end:], text[start:end]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def link_problems(text: str, base: Path) -> list[str]:
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        page = (base / path).resolve() if path else README
        if not page.exists():
            problems.append(f"{target}: no such file")
        elif anchor and page.suffix == ".md" and anchor not in anchors(page):
            problems.append(f"{target}: no heading '#{anchor}' in {path or 'README.md'}")
    return problems


def forbidden(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(line):
                found.append(f"line {number}: {what}, {match.group(0)!r}: {line.strip()}")
    return found


def example_problems(example: Example) -> list[str]:
    """Why an example would not work when pasted into a fresh directory."""
    problems = []
    for argv in example.commands():
        if argv[0] != "isrlab":
            problems.append(f"{argv[0]}: not an isrlab command")
        for word in argv:
            value = word.split("=", 1)[-1]
            if value.startswith(("/", "~")) or ".." in Path(value).parts:
                problems.append(f"{word}: not a path under the directory it runs in")
            elif value.startswith(("tests/", "docs/", "bench/", "spec/", "impl/", ".venv")):
                problems.append(f"{word}: a path into the repository")
    if not example.outputs():
        problems.append("names no path it writes (nothing to check after it ran)")
    return problems


README_TEXT = README.read_text(encoding="utf-8")
EXAMPLES = examples(README_TEXT)


# --- the page -------------------------------------------------------------------------------


def test_the_readme_is_short():
    lines = README_TEXT.count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines (at most {MAX_LINES})"


def test_no_dates_hashes_or_timings_outside_the_figures_table():
    rest, _ = split_figures(README_TEXT)
    assert forbidden(rest) == []


def test_the_checks_catch_what_they_look_for():
    """Each pattern catches what it is for and lets the README's own words through."""
    for bad in ("measured 2026-12-06", "on December 6, 2026", "on 6 Dec 2026", "at c1d9b05",
                "a23b33b9c0ffee1234567890abcdef0123456789", "17 min 30 s wall", "(~4 min)",
                "15 s here", "1,327 s user CPU", "takes 20 seconds", "fixed in #42"):
        assert forbidden(bad), bad
    for fine in ("min ISR 2", "`min.insync.replicas`", "--duration 20s", "KAFKA-14139",
                 "Apache Kafka 4.4.0", "12 steps", "B11 and B12", "local[2]", "decade"):
        assert forbidden(fine) == [], fine
    assert link_problems("[x](docs/none.md) [y](docs/usage.md#no-such-part)", ROOT) != []
    assert link_problems("[x](docs/usage.md#install)", ROOT) == []


def test_every_relative_link_resolves():
    assert LINK.findall(README_TEXT), "the README links nothing"
    assert link_problems(README_TEXT, ROOT) == []


@pytest.mark.parametrize("page", ["docs/usage.md", "docs/benchmarks.md"])
def test_every_relative_link_of_the_pages_the_readme_sends_to_resolves(page):
    path = ROOT / page
    assert link_problems(path.read_text(encoding="utf-8"), path.parent) == []


def test_the_figures_table_links_the_benchmarks_page():
    _, figures = split_figures(README_TEXT)
    rows = [line for line in figures.splitlines() if line.startswith("|")]
    assert len(rows) >= 3, "the figures section has no table"
    assert "(docs/benchmarks.md)" in figures


def test_each_job_has_one_example_that_can_run_anywhere():
    assert [e.name for e in EXAMPLES] == list(JOBS)
    assert {e.name: example_problems(e) for e in EXAMPLES} == {name: [] for name in JOBS}


def test_an_example_bound_to_the_repository_is_refused():
    bound = Example("scenario", 0, "isrlab scenario tests/testdata/b1_hw_truncation.txt\n")
    assert any("into the repository" in p for p in example_problems(bound))
    assert example_problems(Example("x", 0, "isrlab replay /tmp/run7/ --html ../v.html\n"))


# --- the examples, run ----------------------------------------------------------------------


def run_example(example: Example, cwd: Path) -> subprocess.CompletedProcess:
    assert (BIN / "isrlab").exists(), f"no isrlab in {BIN}"
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", "-e", "-c", example.script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def _param(example: Example):
    marks = [pytest.mark.xdist_group("test_spark")] if "analyze" in example.script else []
    return pytest.param(example, id=example.name, marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES])
def test_the_example_runs_from_a_fresh_directory(example, tmp_path):
    done = run_example(example, tmp_path)
    assert done.returncode == example.exit, (
        f"exit {done.returncode}, the README says {example.exit}\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    for path in example.outputs():
        written = tmp_path / path
        assert written.exists(), f"{path} was not written in {tmp_path}"
        if written.is_dir():
            assert any(written.iterdir()), f"{path} is empty"


# --- docs/benchmarks.md, where the README's figures come from -------------------------------

BENCHMARKS = ROOT / "docs" / "benchmarks.md"
BENCH_INDEX = "## Every bench, its latest figure"


def bench_rows(text: str) -> list[list[str]]:
    """The cells of each row of the benchmarks page's first table."""
    start = text.index(BENCH_INDEX)
    end = text.find("\n## ", start + 1)
    rows = [line for line in text[start:end].splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[1:]]


def bench_problems(text: str, scripts: list[str]) -> list[str]:
    rows = bench_rows(text)
    problems = [f"{r[0]}: {len(r)} cells, not 4" for r in rows if len(r) != 4]
    for script in scripts:
        lines = [r for r in rows if len(r) == 4 and f"bench/{script}" in r[1]]
        if len(lines) != 1:
            problems.append(f"bench/{script}: {len(lines)} lines in the table, not 1")
        elif not re.search(r"\b\d{4}-\d{2}-\d{2}\b", lines[0][3]) or "," not in lines[0][3]:
            problems.append(f"bench/{script}: no date and load in '{lines[0][3]}'")
        elif not re.search(r"\d", lines[0][2]):
            problems.append(f"bench/{script}: no figure")
    return problems


def test_every_bench_has_one_line_with_its_command_latest_figure_date_and_load():
    scripts = sorted(p.name for p in (ROOT / "bench").glob("*_bench.py"))
    assert len(scripts) >= 10
    assert bench_problems(BENCHMARKS.read_text(encoding="utf-8"), scripts) == []


def test_a_bench_without_its_line_is_found():
    text = BENCHMARKS.read_text(encoding="utf-8")
    assert bench_problems(text, ["no_such_bench.py"]) != []
    undated = re.sub(r"(\| `python bench/storage_bench.py` \|[^\n]*\| )\d{4}-\d{2}-\d{2},",
                     r"\1recently,", text)
    assert undated != text and bench_problems(undated, ["storage_bench.py"]) != []
