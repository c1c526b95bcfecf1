"""Space-time views of counterexamples: lanes, arrows for messages, per-step changes."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from isrlab.cli import main
from model_check.explore.explorer import explore
from model_check.explore.model import KafkaModel
from model_check.explore.spacetime import timeline, to_html, to_mermaid
from model_check.explore.tla_compat import TlaCompatModel
from spec import VARIANTS, Config

B1 = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1, max_leader_epochs=2,
            max_crashes=1, log_flush_interval_messages=1)
B1_ARGS = ["check", "--variant", "hw-truncation", "--brokers", "2", "--records", "1",
           "--epochs", "2", "--crashes", "1"]


@pytest.fixture(scope="module")
def b1():
    model = KafkaModel(B1)
    result = explore(model)
    assert result.violation is not None
    return model, result, timeline(model, result)


def test_b1_as_lanes_arrows_and_changes(b1):
    _, result, t = b1
    assert t.lanes == ["controller", "b0", "b1", "producer", "clock"]
    assert len(t.steps) == len(result.violation.trace) == 14
    by_action = {(a.label.split()[0], a.received): a for a in t.arrows}
    append = next(s for s in t.steps if s.action == "LeaderAppend")
    produce = by_action[("Produce", append.index)]
    assert (produce.src, produce.dst, produce.dropped) == ("producer", "b0", False)
    # The fetch answer in flight when the follower crashes is lost, not received.
    crash = next(s for s in t.steps if s.action == "BrokerCrash")
    lost = [a for a in t.arrows if a.received == crash.index]
    assert lost and all(a.dropped and a.src == "b0" for a in lost) and crash.fault
    # A LeaderAndIsr is the controller's even when a restart's registration triggers it.
    assert all(a.src == "controller" for a in t.arrows if a.label.startswith("LeaderAndIsr"))
    changed = dict((k, (before, after)) for k, before, after in append.changes)
    assert changed["p0 b0 log"] == ("[]", "v1@e0")
    assert all(s.changes for s in t.steps[1:]), "every step of B1 changes some field"


def test_html_is_self_contained_with_a_lane_per_process_and_a_row_per_step(b1):
    _, _, t = b1
    page = to_html(t)
    assert page.count('class="lane"') == len(t.lanes)
    assert page.count("<tr data-step=") == len(t.steps)
    assert "NoCommittedDataLoss" in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_mermaid_names_senders_and_receivers(b1):
    _, _, t = b1
    text = to_mermaid(t)
    assert text.startswith("sequenceDiagram\n")
    assert re.search(r"producer->>b0: \d+\. LeaderAppend", text)
    assert re.search(r"b0-xb1: \d+\. BrokerCrash", text) is None  # a crash is not a receive
    assert "Note over b1: " in text


def test_tla_compat_lanes_are_replicas():
    model = TlaCompatModel("hw-truncation", brokers=2, log_size=2, records=2, epochs=2)
    result = explore(model)
    t = timeline(model, result)
    assert set(t.lanes) <= {"controller", "r0", "r1", "clock"} and "r1" in t.lanes
    assert not t.arrows  # the TLA+ model has no messages


def test_check_writes_html_and_mermaid(tmp_path, capsys):
    html, mmd = tmp_path / "cex.html", tmp_path / "cex.mmd"
    properties = tmp_path / "flush1.properties"
    properties.write_text("log.flush.interval.messages=1\n")
    code = main([*B1_ARGS, "--config", str(properties), "--html", str(html), "--mermaid",
                 str(mmd)])
    capsys.readouterr()
    assert code == 1 and "hw-truncation: NoCommittedDataLoss after 13 steps" in html.read_text()
    assert mmd.read_text().startswith("sequenceDiagram")
    assert main([*B1_ARGS, "--html", str(tmp_path / "no" / "x.html")]) == 2
    assert "--html" in capsys.readouterr().err


def test_a_browser_renders_the_lanes_and_the_table(b1, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); "
                    "the HTML was checked as text only")
    _, _, t = b1
    page = tmp_path / "cex.html"
    page.write_text(to_html(t))
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert dom.count('class="lane"') == len(t.lanes)
    assert dom.count("<tr data-step=") == len(t.steps)
    shot = tmp_path / "cex.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1000,900", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from impl.config import ClusterConfig
    from impl.sim import SimOptions, simulate

    directory = tmp_path_factory.mktemp("run") / "seed-3"
    simulate(ClusterConfig(), SimOptions(seed=3, duration_ms=6_000,
                                         nemesis=("crash", "partition"))).write(directory)
    return directory


def test_replay_html_shows_a_run_window_with_messages(run_dir, tmp_path, capsys):
    page = tmp_path / "run.html"
    assert main(["replay", str(run_dir), "--html", str(page), "--window", "0:1000"]) == 0
    capsys.readouterr()
    text = page.read_text()
    for lane in ("b0", "b1", "b2", "producer"):
        assert f'data-lane="{lane}"' in text
    assert text.count('class="msg"') > 10 and "accepted" in text
    assert "p0 b0 high_watermark" in text  # a post-state change, named by field


def test_replay_html_of_a_divergence_ends_at_the_divergent_line(run_dir, tmp_path, capsys):
    import json

    run = tmp_path / "copy"
    shutil.copytree(run_dir, run)
    path = run / "b1.ndjson"
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        body = json.loads(line)
        if body.get("action") == "FollowerHandleFetchResponse" and \
                body["state"]["high_watermark"] > 3:
            body["state"]["high_watermark"] += 1
            lines[i] = json.dumps(body)
            break
    path.write_text("\n".join(lines) + "\n")
    page = tmp_path / "div.html"
    assert main(["replay", str(run), "--html", str(page)]) == 1
    capsys.readouterr()
    text = page.read_text()
    assert f"divergence at {path}:{i + 1}" in text
    last = re.findall(r'<tr data-step="(\d+)"><td>\d+</td><td>([^<]+)</td><td>([^<(]+)', text)[-1]
    assert last[1:] == ("b1", "FollowerHandleFetchResponse")


def test_replay_window_must_be_a_range(run_dir, tmp_path, capsys):
    for bad in ("3000", "5:2", "a:b"):
        assert main(["replay", str(run_dir), "--html", str(tmp_path / "x.html"),
                     "--window", bad]) == 2
        assert "--window" in capsys.readouterr().err


def test_report_page_is_self_contained(tmp_path):
    from pyspark_harness.page import markdown_page

    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    page = markdown_page("# Report\n\n| config | lost |\n|---|---|\n| acks=1 | 3 |\n\n"
                         "![Lost writes](plot.png)\n", tmp_path, "isrlab report")
    assert "<table>" in page and "<td>acks=1</td>" in page
    assert 'src="data:image/png;base64,' in page and 'src="plot.png"' not in page


def test_the_cross_check_section_shows_only_disagreeing_rows():
    from pyspark_harness.report import cross_check_section

    rows = [dict(run=f"seed-{i}", kind="lost-write", expected=1, found=1, agrees=True,
                 source="campaign") for i in range(50)]
    assert cross_check_section(rows)[1].startswith("All 50 counts agree")
    rows[7] = dict(rows[7], found=3, agrees=False)
    text = "".join(cross_check_section(rows))
    assert "**1 of 50 counts disagree**" in text and "seed-7" in text and "seed-8" not in text
