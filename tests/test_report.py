"""``mcpfleet report`` end to end: runs recorded by the real code paths, the console script, the HTML rendered
by headless Chromium and read back from its DOM.

Two runs: one real (the local launcher on a tiny pack with the scripted oracle, noop and malformed models,
2 attempts), one synthetic (TrialResult records written through a LocalStore and summarised with
``build_summary``, with known costs, turns, two services and every failure category, and a model name full of
HTML special characters). Every plot's data attributes are checked against summary.json and the records.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.config import Config
from conftest import REPO, make_tiny_pack
from s3server import moto_endpoint

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.report.load import load_run
from mcpfleet.runner.report.plots import PLOT_IDS
from mcpfleet.runner.report.scoring import ALL
from mcpfleet.runner.report.summary import build_summary
from mcpfleet.runner.results import store as store_mod
from mcpfleet.runner.results.outcome import CATEGORIES, is_scored
from mcpfleet.runner.results.records import Timings, Totals, TrialResult, dumps
from mcpfleet.runner.results.store import LocalStore
from mcpfleet.runner.spec.evalrun import AgentKind, Limits, ModelSpec
from mcpfleet.runner.spec.load import load_evalrun, parse_evalrun
from mcpfleet.runner.spec.trial import TrialSpec

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
CHROMIUM = shutil.which("chromium")
EVIL = "<b>acme</b> & \"big\" 'model'"  # a model name that must come out as text, never as markup
FREE = "free-model"  # costs unknown
SMALL = "small-model"


# ------------------------------------------------------------------------------------------- the runs


def real_run(root: Path) -> Path:
    pack = make_tiny_pack(root / "pack", tasks=2)
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "real"},
        "spec": {
            "models": [
                {"name": "oracle", "model": "scripted/oracle"},
                {"name": "noop", "model": "scripted/noop"},
                {"name": "malformed", "model": "scripted/malformed"},
            ],
            "tasks": {"path": str(pack)},
            "attempts": 2,
            "concurrency": {"total": 6},
            "output": {"uri": str(root / "runs")},
        },
    }
    path = root / "real.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    summary, run_root = execute(load_evalrun(path), root, show_progress=False)
    assert summary["complete"] and summary["trials_recorded"] == 12
    return Path(run_root)


def synthetic_run(root: Path, name: str = "synthetic") -> Path:
    """Records written like a trial writes them, summarised like the launcher does; costs and turns set."""
    run = parse_evalrun(
        {
            "apiVersion": "mcpfleet.io/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": name},
            "spec": {"models": [{"name": "m0", "model": "openai/x"}], "attempts": 3},
        }
    )
    store = LocalStore(root / name)
    rng = random.Random(7)
    models = [(EVIL, 0.8, 0.02), (SMALL, 0.45, 0.004), (FREE, 0.3, None)]
    trials, fail_i = [], 0
    for mi, (model, skill, cost) in enumerate(models):
        for service in ("filesystem", "postgres"):
            for t in range(4):
                for attempt in (1, 2, 3):
                    task_id = f"{service}/standard/cat/task_{t}"
                    trial_id = f"m{mi}.{service}.standard.cat.task_{t}.{attempt}"
                    h = f"h{mi}{t}{attempt}{service[0]}"
                    trials.append(
                        TrialSpec(
                            run=name,
                            trial_id=trial_id,
                            spec_hash=h,
                            model=ModelSpec(name=f"m{mi}", model="openai/x"),
                            task_id=task_id,
                            tasks_root="/nowhere",
                            attempt=attempt,
                            agent=AgentKind.mcpfleet,
                            limits=Limits(max_turns=30),
                        )
                    )
                    passed = rng.random() < skill
                    failure = None
                    if not passed:
                        failure = CATEGORIES[fail_i % len(CATEGORIES)]
                        fail_i += 1
                    turns = 30 if failure == "turn_limit" else rng.randint(2, 25)
                    res = TrialResult(
                        run=name,
                        trial_id=trial_id,
                        spec_hash=h,
                        model=model,
                        litellm_model="openai/x",
                        service=service,
                        task_id=task_id,
                        attempt=attempt,
                        agent="mcpfleet",
                        passed=passed,
                        failure=failure,
                        timings=Timings(agent=1.0 + turns / 10),
                        totals=Totals(
                            turns=turns,
                            tool_calls=max(0, turns - 1),
                            input_tokens=900 * turns,
                            output_tokens=60 * turns,
                            cost_usd=None if cost is None else round(cost * turns / 10, 6),
                        ),
                    )
                    store.write_files(trial_id, {"meta.json": b"{}"})
                    store.commit(trial_id, dumps(res.model_dump(mode="json")))
    # One stale record of a trial no longer planned (another hash): build_summary ignores it, so must the report.
    stale = json.loads((store.root / "trials" / trials[0].trial_id / "result.json").read_text())
    store.commit(
        "m9.filesystem.standard.cat.task_0.1",
        dumps({**stale, "trial_id": "m9.filesystem.standard.cat.task_0.1", "model": "gone-model"}),
    )
    store.write_json("summary.json", build_summary(run, trials, store))
    return store.root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report")
    return {"real": real_run(root / "r"), "synthetic": synthetic_run(root / "s"), "root": root}


# ------------------------------------------------------------------------------------------- helpers


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in (env or os.environ).items() if k != "COLUMNS"}
    return subprocess.run(
        [str(MCPFLEET), *args], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.text_parts: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.text_parts) + "".join(c.text for c in self.children)

    def iter(self, tag: str | None = None, **want: str) -> list[Node]:
        out = []
        for c in self.children:
            if (tag is None or c.tag == tag) and all(c.attrs.get(k.replace("_", "-")) == v for k, v in want.items()):
                out.append(c)
            out += c.iter(tag, **want)
        return out

    def find(self, tag: str | None = None, **want: str) -> Node:
        found = self.iter(tag, **want)
        assert found, f"no <{tag} {want}>"
        return found[0]

    def has_class(self, cls: str) -> bool:
        return cls in self.attrs.get("class", "").split()

    def title(self) -> str:
        return next((c.text for c in self.children if c.tag == "title"), "")


VOID = {"meta", "link", "br", "img", "input", "hr", "source", "wbr", "area", "base", "col", "embed", "track"}


class Dom(HTMLParser):
    """A small tree builder over the stdlib parser (enough for Chromium's serialised DOM)."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag: str) -> None:
        n: Node | None = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data: str) -> None:
        self.cur.text_parts.append(data)


def num(s: str) -> float | None:
    return None if s == "null" else float(s)


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "Debian chromium is required for these tests"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def png_pixels_vary(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the filtered scanlines); a blank page gives only a handful."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def summaries(paths: dict[str, Path]) -> dict[str, dict[str, Any]]:
    return {name: json.loads((paths[name] / "summary.json").read_text()) for name in ("real", "synthetic")}


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((path / "trials").glob("*/result.json"))]


def overall(summary: dict[str, Any], model: str) -> dict[str, Any]:
    rows = [r for r in summary["rows"] if r["model"] == model]
    return next((r for r in rows if r["service"] == ALL), rows[0])


@pytest.fixture(scope="module")
def rendered(runs: dict[str, Path]) -> dict[str, Any]:
    """The two-run report written by the console script, dumped and screenshotted by headless Chromium."""
    out = runs["root"] / "two.html"
    proc = cli("report", str(runs["real"]), str(runs["synthetic"]), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    dump = chromium("--dump-dom", out.as_uri(), tmp=runs["root"])
    assert dump.returncode == 0 and "</html>" in dump.stdout, dump.stderr[-2000:]
    shot = runs["root"] / "two.png"
    snap = chromium("--window-size=1000,2400", f"--screenshot={shot}", out.as_uri(), tmp=runs["root"])
    assert snap.returncode == 0 and shot.exists(), snap.stderr[-2000:]
    return {"html": out.read_text(), "stdout": proc.stdout, "dom": Dom(dump.stdout).root, "png": shot}


# -------------------------------------------------------------------------------------------- tests


def test_cli_prints_a_table_per_run_and_writes_one_file(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    out = " ".join(rendered["stdout"].split())
    assert "real (12/12 trials" in out and "synthetic (72/72 trials" in out
    assert "oracle" in out and "small-model" in out and f"report: {runs['root'] / 'two.html'}" in out
    assert "1 record(s) of trials no longer planned" in out  # the stale record of the synthetic run


def test_page_is_self_contained(rendered: dict[str, Any]) -> None:
    html = rendered["html"]
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert not re.search(r"https?://", html)
    assert not re.search(r"<(script|link|iframe|img|object|embed)\b", html, re.I)
    assert "@import" not in html and "url(" not in html
    width, height, distinct = png_pixels_vary(rendered["png"])
    assert (width, height) == (1000, 2400)
    assert distinct > 50, "the screenshot is blank"


def test_all_plots_present_with_caption_axes_legend_and_titles(rendered: dict[str, Any]) -> None:
    dom = rendered["dom"]
    for fid in PLOT_IDS:
        fig = dom.find("figure", id=fid)
        svg = fig.find("svg")
        assert fig.find("figcaption").text.strip()
        assert svg.attrs.get("role") == "img" and svg.title()
        assert [t for t in svg.iter("text") if t.has_class("axis-label")], fid
        if fid != "plot-cost":
            assert [g for g in svg.iter("g") if g.has_class("legend")], fid
        marks = [
            n
            for n in svg.iter()
            if "data-value" in n.attrs
            or "data-count" in n.attrs
            or "data-turns" in n.attrs
            or "data-pass-at-1" in n.attrs
        ]
        assert marks, fid
        assert all(n.title() for n in marks if n.tag in ("rect", "circle", "path", "line")), fid


def test_pass_at_1_and_pass_at_k_marks_match_summary(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    dom = rendered["dom"]
    p1 = dom.find("figure", id="plot-pass-at-1")
    pk = dom.find("figure", id="plot-pass-at-k")
    total = 0
    for run, summary in summaries(runs).items():
        for row in summary["rows"]:
            key = {"data_run": run, "data_model": row["model"], "data_service": row["service"]}
            bars = [n for n in p1.iter("rect", **key) if n.has_class("bar")]
            assert len(bars) == 1, key
            assert num(bars[0].attrs["data-value"]) == row["pass_at_1"]
            assert num(bars[0].attrs["data-std"]) == row["pass_at_1_std"]
            assert int(bars[0].attrs["data-trials"]) == row["trials"]
            errs = p1.iter("path", **key)
            assert [num(e.attrs["data-value"]) for e in errs] == (
                [row["pass_at_1_std"]] if row["pass_at_1_std"] else []
            )
            at = pk.find("circle", data_metric="pass_at_k", **key)
            hat = pk.find("circle", data_metric="pass_hat_k", **key)
            assert num(at.attrs["data-value"]) == row["pass_at_k"]
            assert num(hat.attrs["data-value"]) == row["pass_hat_k"]
            assert num(at.attrs["data-unbiased"]) == row["pass_at_k_unbiased"]
            assert int(at.attrs["data-k"]) == row["attempts"] and f"pass@{row['attempts']}" in at.title()
            total += 1
    assert len([n for n in p1.iter("rect") if n.has_class("bar")]) == total
    syn = summaries(runs)["synthetic"]
    assert {r["service"] for r in syn["rows"] if r["model"] == SMALL} == {"filesystem", "postgres", ALL}
    assert any(r["pass_at_1_std"] for r in syn["rows"])  # error bars were really drawn


def test_cost_map_points(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    fig = rendered["dom"].find("figure", id="plot-cost")
    points = [n for n in fig.iter("circle") if n.has_class("point")]
    expected = {(run, r["model"]) for run, s in summaries(runs).items() for r in s["rows"]}
    assert sorted((p.attrs["data-run"], p.attrs["data-model"]) for p in points) == sorted(expected)
    for run, summary in summaries(runs).items():
        for model in {r["model"] for r in summary["rows"]}:
            o = overall(summary, model)
            p = fig.find("circle", data_run=run, data_model=model)
            assert num(p.attrs["data-pass-at-1"]) == o["pass_at_1"]
            assert num(p.attrs["data-avg-cost-usd"]) == o["avg_cost_usd"]
            assert num(p.attrs["data-cost-usd"]) == o["cost_usd"]
            assert p.attrs["data-cost-known"] == ("false" if o["avg_cost_usd"] is None else "true")
            if o["avg_cost_usd"] is None:
                assert p.has_class("cost-unknown") and "cost unknown" in p.title()
    syn = summaries(runs)["synthetic"]
    assert overall(syn, SMALL)["avg_cost_usd"] and overall(syn, FREE)["avg_cost_usd"] is None
    assert "cost unknown" in fig.text


def test_turns_distribution_has_one_dot_per_trial(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    fig = rendered["dom"].find("figure", id="plot-turns")
    summ = summaries(runs)
    for run in ("real", "synthetic"):
        planned = {r["model"] for r in summ[run]["rows"]}
        recs = [r for r in records(runs[run]) if r["model"] in planned]
        for model in planned:
            dots = [n for n in fig.iter("circle", data_run=run, data_model=model) if n.has_class("trial")]
            assert len(dots) == overall(summ[run], model)["scored"]  # what the model did, not its provider
            got = Counter(
                (
                    d.attrs["data-task"],
                    int(d.attrs["data-attempt"]),
                    d.attrs["data-service"],
                    int(d.attrs["data-turns"]),
                    d.attrs["data-passed"] == "true",
                )
                for d in dots
            )
            want = Counter(
                (r["task_id"], r["attempt"], r["service"], r["totals"]["turns"], r["passed"])
                for r in recs
                if r["model"] == model and is_scored(r["failure"])
            )
            assert got == want
            fails = Counter(d.attrs.get("data-failure") for d in dots if d.attrs["data-passed"] == "false")
            assert fails == Counter(overall(summ[run], model)["failures"])
    assert not fig.iter("circle", data_model="gone-model")


def test_failure_breakdown_matches_summary(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    fig = rendered["dom"].find("figure", id="plot-failures")
    seen = set()
    for run, summary in summaries(runs).items():
        for model in {r["model"] for r in summary["rows"]}:
            o = overall(summary, model)
            segs = fig.iter("rect", data_run=run, data_model=model)
            assert {s.attrs["data-category"]: int(s.attrs["data-count"]) for s in segs} == {
                **o["failures"],
                **o["not_scored"],
            }
            for s in segs:
                assert num(s.attrs["data-share"]) == int(s.attrs["data-count"]) / o["trials"]
                assert s.attrs["data-scored"] == ("false" if s.attrs["data-category"] in o["not_scored"] else "true")
            seen |= set(o["failures"]) | set(o["not_scored"])
    assert set(CATEGORIES) <= seen  # the synthetic run uses the whole taxonomy
    legend = " ".join(t.text for t in fig.iter("text") if t.has_class("legend-label"))
    assert all(c in legend for c in CATEGORIES)
    assert overall(summaries(runs)["real"], "noop")["failures"] == {"premature_stop": 4}


def test_leaderboard_one_row_per_run_and_model_by_pass_at_1(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    table = rendered["dom"].find("table", id="leaderboard")
    rows = table.find("tbody").iter("tr")
    summ = summaries(runs)
    index = {"real": 0, "synthetic": 1}
    want = sorted(
        ((run, m, overall(s, m)) for run, s in summ.items() for m in {r["model"] for r in s["rows"]}),
        key=lambda x: (-x[2]["pass_at_1"], -(x[2]["pass_at_k"] or 0), index[x[0]], x[1]),
    )
    assert [(r.attrs["data-run"], r.attrs["data-model"]) for r in rows] == [(run, m) for run, m, _ in want]
    assert len(rows) == 6
    for r, (run, model, o) in zip(rows, want, strict=True):
        assert num(r.attrs["data-pass-at-1"]) == o["pass_at_1"] and num(r.attrs["data-std"]) == o["pass_at_1_std"]
        assert num(r.attrs["data-pass-at-k"]) == o["pass_at_k"] and num(r.attrs["data-pass-hat-k"]) == o["pass_hat_k"]
        assert num(r.attrs["data-cost-usd"]) == o["cost_usd"] and int(r.attrs["data-k"]) == o["attempts"]
        cells = [c.text for c in r.iter("td")]
        assert cells[1:3] == [run, model]
    assert rows[0].attrs["data-model"] == "oracle"
    p1 = [float(r.attrs["data-pass-at-1"]) for r in rows]  # pass@1 is never null (num() allows it for pass@k)
    assert p1 == sorted(p1, reverse=True)


def test_run_headers(rendered: dict[str, Any], runs: dict[str, Path]) -> None:
    dom = rendered["dom"]
    for i, (run, summary) in enumerate(summaries(runs).items()):
        sec = dom.find("section", id=f"run-{i}")
        assert sec.attrs["data-run"] == run and sec.attrs["data-spec-hash"] == summary["spec_hash"]
        assert int(sec.attrs["data-trials-recorded"]) == summary["trials_recorded"]
        assert int(sec.attrs["data-trials-planned"]) == summary["trials_planned"]
        assert sec.attrs["data-source"] == "summary.json" and sec.attrs["data-complete"] == "true"
        assert summary["generated_at"] in sec.text and summary["spec_hash"] in sec.text
        # Outcomes that measured nothing of the model have their own column, apart from the failures.
        cells = [c.text for c in sec.iter("td") if c.has_class("not-scored")]
        want = [", ".join(f"{c} {n}" for c, n in r["not_scored"].items()) or "-" for r in summary["rows"]]
        assert cells == want
    assert any(r["not_scored"] for r in summaries(runs)["synthetic"]["rows"])


def test_model_names_are_escaped(rendered: dict[str, Any]) -> None:
    html, dom = rendered["html"], rendered["dom"]
    assert EVIL not in html and "<b>acme" not in html
    assert "&lt;b&gt;acme&lt;/b&gt; &amp; &quot;big&quot; &#x27;model&#x27;" in html
    assert not dom.iter("b")  # no element injected
    bars = dom.find("figure", id="plot-pass-at-1").iter("rect", data_model=EVIL)
    assert len(bars) == 3  # filesystem, postgres, all
    assert any(t.text == f"{EVIL} · synthetic" for t in dom.iter("text") if t.has_class("series-label"))
    assert any(EVIL in c.text for c in dom.find("table", id="leaderboard").iter("td"))


def test_missing_summary_is_recomputed_from_the_records(runs: dict[str, Path], tmp_path: Path) -> None:
    part = tmp_path / "partial"
    shutil.copytree(runs["real"], part)
    full = json.loads((part / "summary.json").read_text())
    (part / "summary.json").unlink()
    same = load_run(str(part))
    assert same.source == "recomputed" and same.summary["rows"] == full["rows"]
    assert (same.summary["trials_planned"], same.summary["complete"]) == (12, True)  # from run.json
    for d in sorted((part / "trials").iterdir())[:5]:  # a run stopped early
        (d / "result.json").unlink()
    out = tmp_path / "partial.html"
    proc = cli("report", str(part), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "real (7/12 trials" in " ".join(proc.stdout.split())
    dom = Dom(out.read_text()).root
    sec = dom.find("section", id="run-0")
    assert (sec.attrs["data-source"], sec.attrs["data-complete"], sec.attrs["data-trials-recorded"]) == (
        "recomputed",
        "false",
        "7",
    )
    assert "summary.json is missing" in sec.text
    assert len([n for n in dom.iter("circle") if n.has_class("trial")]) == 7
    assert not dom.iter("table", id="leaderboard")  # one run: no leaderboard


def test_report_from_s3(runs: dict[str, Path], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in store_mod.AWS_ENV}
    env.update(
        AWS_ACCESS_KEY_ID="AKIAREPORTTEST000001",
        AWS_SECRET_ACCESS_KEY="report/test/secret",
        AWS_DEFAULT_REGION="us-east-1",
    )
    local = tmp_path / "local.html"
    assert cli("report", str(runs["synthetic"]), "-o", str(local)).returncode == 0
    with moto_endpoint() as endpoint:
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            config=Config(s3={"addressing_style": "path"}),
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )
        s3.create_bucket(Bucket="evals")
        for f in runs["synthetic"].rglob("*"):
            if f.is_file():
                s3.upload_file(str(f), "evals", f"fleet/synthetic/uid-1/{f.relative_to(runs['synthetic'])}")
        out = tmp_path / "s3.html"
        proc = cli("report", "s3://evals/fleet/synthetic/uid-1", "--endpoint-url", endpoint, "-o", str(out), env=env)
        assert proc.returncode == 0, proc.stderr
        missing = cli("report", "s3://evals/fleet/nothing", "--endpoint-url", endpoint, "-o", str(out), env=env)
        assert missing.returncode == 2 and "no summary.json and no trial records" in missing.stderr
    assert "synthetic (72/72 trials" in " ".join(proc.stdout.split())
    s3_html, local_html = out.read_text(), local.read_text()
    assert "s3://evals/fleet/synthetic/uid-1" in s3_html
    figures = re.compile(r'<figure id="plot-.*?</figure>', re.S)
    assert figures.findall(s3_html) == figures.findall(local_html) and len(figures.findall(s3_html)) == 5
    assert env["AWS_SECRET_ACCESS_KEY"] not in s3_html + proc.stdout + proc.stderr


def test_bad_references_fail_cleanly(tmp_path: Path) -> None:
    helped = cli("report", "--help")
    assert helped.returncode == 0 and "--endpoint-url" in helped.stdout and "--output" in helped.stdout
    proc = cli("report", str(tmp_path / "nope"), "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "no such run folder" in proc.stderr
    (tmp_path / "runs" / "a" / "trials").mkdir(parents=True)
    proc = cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "give one of those" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("report", "s3://bucket-only", "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "not a bare bucket" in proc.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_run_recorded_by_two_harnesses_is_noted(runs: dict[str, Path], tmp_path: Path) -> None:
    """Records written by another runner image (an image edited mid-run) are counted and named in the report,
    from summary.json or, without one, from the records themselves."""
    part = tmp_path / "mixed"
    shutil.copytree(runs["real"], part)
    results = sorted((part / "trials").glob("*/result.json"))
    for i, path in enumerate(results):
        rec = json.loads(path.read_text())
        rec["harness"] = "mcpfleet 0.1.0 (runner:a)" if i < 3 else "mcpfleet 0.1.0 (runner:b)"
        path.write_text(json.dumps(rec))
    (part / "summary.json").unlink()
    loaded = load_run(str(part))
    assert loaded.summary["harness"] == {"mcpfleet 0.1.0 (runner:a)": 3, "mcpfleet 0.1.0 (runner:b)": len(results) - 3}
    assert any("run by 2 harnesses" in n and "(runner:a) (3 trials)" in n for n in loaded.notes)
    for path in results:  # one harness: nothing to say
        rec = json.loads(path.read_text())
        rec["harness"] = "mcpfleet 0.1.0"
        path.write_text(json.dumps(rec))
    assert not any("harness" in n for n in load_run(str(part)).notes)


def test_a_summary_of_wrong_types_is_recomputed_not_trusted(runs: dict[str, Path], tmp_path: Path) -> None:
    """summary.json is a file anyone may edit: a complete one whose cells are not numbers (markup where a count
    goes, text where a rate goes) crashed the report or was written into the page raw. It is set aside, the
    aggregates recomputed from the records, and the page says why."""
    part = tmp_path / "edited"
    shutil.copytree(runs["real"], part)
    summary = json.loads((part / "summary.json").read_text())
    assert summary["complete"]
    summary["rows"][0]["trials"] = "<script>alert(1)</script>"
    summary["toolcall"] = {"m": {"by_label": {"correct": {"cases": "<img src=x onerror=alert(2)>", "passed": 1}}}}
    (part / "summary.json").write_text(json.dumps(summary))
    loaded = load_run(str(part))
    assert loaded.source == "recomputed" and any("summary.json is damaged (rows.0.trials" in n for n in loaded.notes)
    out = tmp_path / "edited.html"
    proc = cli("report", str(part), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    summary["rows"][0]["trials"], summary["rows"][0]["pass_at_1"] = 12, "high"
    del summary["toolcall"]
    (part / "summary.json").write_text(json.dumps(summary))
    assert load_run(str(part)).source == "recomputed"  # a rate that is no number: the page would crash on it


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        (("rows", 0, "pass_at_1"), float("nan"), "rows.0.pass_at_1: nan is not a finite number"),
        (("rows", 0, "pass_at_1_std"), float("inf"), "rows.0.pass_at_1_std: inf is not a finite number"),
        (("rows", 0, "pass_at_k"), -5.0, "rows.0.pass_at_k: -5.0 is negative"),
        (("rows", 0, "pass_hat_k"), 1.5, "rows.0.pass_hat_k: 1.5 is above 1"),
        (("rows", 0, "pass_at_k_curve", "1"), 2.0, "rows.0.pass_at_k_curve.1: 2.0 is above 1"),
        (("rows", 0, "cost_usd"), -0.5, "rows.0.cost_usd: -0.5 is negative"),
        (("rows", 0, "avg_turns"), float("-inf"), "rows.0.avg_turns: -inf is not a finite number"),
        (("rows", 0, "trials"), -3, "rows.0.trials: -3 is negative"),
        (("rows", 0, "failures", "premature_stop"), -1, "rows.0.failures.premature_stop: -1 is negative"),
        (("trials_planned",), -1, "trials_planned: -1 is negative"),
    ],
)
def test_a_summary_of_impossible_numbers_is_recomputed_not_shown(
    runs: dict[str, Path], tmp_path: Path, where: tuple[Any, ...], value: float, said: str
) -> None:
    """The s29 audit (L1): a complete summary.json with NaN, Infinity, -500% or 150% as a rate (or a negative
    count or cost) passed the type check and was shown as it was ("pass@1 nan% ± nan%", data-pass-at-1="nan").
    No run computes such a number: the summary is damaged, the aggregates recomputed from the records."""
    part = tmp_path / "impossible"
    shutil.copytree(runs["real"], part)
    summary = json.loads((part / "summary.json").read_text())
    assert summary["complete"] and load_run(str(part)).source == "summary.json"
    node = summary
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    (part / "summary.json").write_text(json.dumps(summary))  # (json writes NaN and Infinity; json.loads reads them)
    loaded = load_run(str(part))
    assert loaded.source == "recomputed", loaded.notes
    assert any(f"summary.json is damaged ({said}): aggregates recomputed" in n for n in loaded.notes), loaded.notes
    for row in loaded.summary["rows"]:
        assert 0 <= row["pass_at_1"] <= 1 and row["trials"] >= 0
    out = tmp_path / "impossible.html"
    proc = cli("report", str(part), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert not re.search(r'="-?(nan|inf)"|(nan|inf|-\d[\d.]*)%', page, re.I), "an impossible number is shown"


def test_a_toolcall_breakdown_of_impossible_numbers_is_damaged() -> None:
    from mcpfleet.runner.report.load import _damaged

    row = {"model": "m", "service": "s", "trials": 1, "attempts": 1, "pass_at_1": 1.0}
    row |= {"pass_at_1_std": 0.0, "pass_at_k": 1.0, "pass_hat_k": 1.0}
    assert _damaged({"rows": [row]}) is None
    label = {"cases": 2, "passed": 1, "pass_rate": float("nan")}
    got = _damaged({"rows": [row], "toolcall": {"m": {"by_label": {"correct": label}}}})
    assert got == "summary.json is damaged (toolcall.m.by_label.correct.pass_rate: nan is not a finite number)"
    got = _damaged({"rows": [row], "toolcall": {"m": {"call_classes": {"valid": -2}}}})
    assert got == "summary.json is damaged (toolcall.m.call_classes.valid: -2 is negative)"


def test_an_absurd_attempts_in_run_json_is_not_trusted(runs: dict[str, Path], tmp_path: Path) -> None:
    """run.json is a file anyone may edit: `attempts: 3000000` made the report compute pass@3000000 (a loop of k
    steps per task); a k above what a spec allows is set aside for the records' own."""
    part = tmp_path / "absurd"
    shutil.copytree(runs["real"], part)
    (part / "summary.json").unlink()
    run_json = json.loads((part / "run.json").read_text())
    k = max(int(json.loads(p.read_text())["attempt"]) for p in part.glob("trials/*/result.json"))
    run_json["evalrun"]["spec"]["attempts"] = 3_000_000
    (part / "run.json").write_text(json.dumps(run_json))
    loaded = load_run(str(part))
    assert {r["attempts"] for r in loaded.summary["rows"]} == {k}


def test_an_output_inside_a_run_folder_is_refused_before_any_record_is_replaced(tmp_path: Path) -> None:
    """`report RUN -o RUN/trials/<id>/result.json` replaced the trial's record with the page, so the next run
    took it as damaged and ran the paid trial again; any output inside a run given is refused, records intact."""
    from mcpfleet.runner.report.html import write_report
    from mcpfleet.runner.report.load import ReportError

    run = synthetic_run(tmp_path / "runs")
    other = synthetic_run(tmp_path / "more", name="other")
    record = next((run / "trials").glob("*/result.json"))
    targets = [record, run / "summary.json", run / "report.html", run / "trials" / ".." / "x.html"]
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for target in targets:
        with pytest.raises(ReportError, match=r"^--output .*: inside the run folder .*; write the report outside"):
            write_report([str(other), str(run / "summary.json")], target)
    linked = tmp_path / "link"
    linked.symlink_to(run)  # a path through a link into the run is inside it too
    with pytest.raises(ReportError, match="inside the run folder"):
        write_report([str(run)], linked / "summary.json")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    proc = cli("report", str(run), "-o", str(record))
    assert proc.returncode == 2 and "--output" in proc.stderr and "Traceback" not in proc.stderr
    assert record.read_bytes() == before[record]
    beside = tmp_path / "runs" / "report.html"  # next to the run folder, not in it: written
    write_report([str(run)], beside)
    assert beside.read_text().startswith("<!DOCTYPE html>")


def test_a_file_given_as_the_run_is_named_a_file(tmp_path: Path) -> None:
    """`report evalrun.yaml` said "no such run folder" for a file that exists."""
    spec = tmp_path / "base.yaml"
    spec.write_text("kind: EvalRun\n")
    proc = cli("report", str(spec), "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "is a file (an EvalRun?), not a run folder" in proc.stderr
    assert "no such run folder" not in proc.stderr
