"""Services declared as data (``<pack>/<service>/service.yaml``, issue 46): a pack brings its own MCP server with no
Python outside its verifiers; server variants are a sweep axis; every record names the server it measured; two
variants are compared on paired trials.

The declared server in most tests is the pinned filesystem server under a name of the pack's own ("files"): the
same server the bundled filesystem service runs, so its bundled tasks (and their oracles and verifiers) serve as
the declared service's, unchanged except that their verifiers get the folder from the declaration.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from proctree import processes_naming

from mcpfleet.runner.report.compare import compare, mcnemar_exact, paired_bootstrap, worse_than

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
CATEGORY = "team_project"
DECLARATION = {
    "server": {"command": "mcp-server-filesystem", "args": ["{state}"], "env": {"TZ": "UTC"}},
    "state": {"kind": "folder"},
    "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}"}},
    "prompt": "The project's files are in {state}.",
}


def make_pack(root: Path, declaration: dict[str, Any] | None = None, service: str = "files", tasks: int = 2) -> Path:
    """A pack whose service ``service`` is declared, holding ``tasks`` of the bundled filesystem tasks of one
    category with that category's state."""
    folder = root / "pack" / service
    names = sorted(p.name for p in (REPO / "tasks/filesystem/standard" / CATEGORY).iterdir())[:tasks]
    for name in names:
        shutil.copytree(REPO / "tasks/filesystem/standard" / CATEGORY / name, folder / "standard" / CATEGORY / name)
    shutil.copytree(REPO / "tasks/filesystem/states" / CATEGORY, folder / "states" / CATEGORY)
    shutil.copy(REPO / "tasks/filesystem/states" / f"{CATEGORY}.times.json", folder / "states")
    (folder / "service.yaml").write_text(yaml.safe_dump(declaration or DECLARATION))
    return root / "pack"


def write_run(root: Path, pack: Path, servers: list[dict[str, Any]] | None = None, **spec: Any) -> Path:
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "declared"},
        "spec": {
            "models": [
                {"name": "scripted-oracle", "model": "scripted/oracle"},
                {"name": "scripted-noop", "model": "scripted/noop"},
            ],
            "tasks": {"path": str(pack)},
            "output": {"uri": str(root / "runs")},
            **({"servers": servers} if servers else {}),
            **spec,
        },
    }
    path = root / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def mcpfleet(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def records(root: Path) -> dict[str, dict[str, Any]]:
    trials = root / "runs" / "declared" / "trials"
    return {p.name: json.loads((p / "result.json").read_text()) for p in sorted(trials.iterdir())}


def test_a_declared_server_with_two_variants_runs_paired_trials_and_records_what_it_measured(tmp_path: Path) -> None:
    """Variants x models x tasks, each record naming its variant and the server's fingerprint; the declared
    prompt reaches the model; a variant that serves only part of the state is measured worse, and ``mcpfleet compare``
    fails the gate on it (and passes it for the variant that is the same server)."""
    pack = make_pack(tmp_path)
    servers: list[dict[str, Any]] = [
        {"name": "same", "service": "files"},
        {"name": "twin", "service": "files", "env": {"TZ": "UTC", "UNUSED": "1"}},
        {"name": "astray", "service": "files", "args": ["{state}/docs"]},  # serves one subfolder of the state
    ]
    variants = [s["name"] for s in servers]
    run = write_run(tmp_path, pack, servers)
    done = mcpfleet("run", str(run), "--no-progress", env={"OPENAI_API_KEY": "sk-canary-declared-0000"})
    assert done.returncode == 0, done.stdout + done.stderr
    recs = records(tmp_path)
    assert len(recs) == 3 * 2 * 2  # variants x models x tasks
    for tid, rec in recs.items():
        variant = rec["variant"]
        assert f".files@{variant}." in tid and rec["service"] == "files"
        if rec["model"] == "scripted-oracle":
            assert rec["server"]["name"] == "secure-filesystem-server", rec["server"]
            assert rec["server"]["tools"] > 5 and rec["server"]["tools_digest"].startswith("sha256:")
            assert rec["passed"] is (variant != "astray"), (tid, rec["verifier"])
        else:
            assert rec["passed"] is False
    again = mcpfleet("run", str(run), "--no-progress")  # a resume: every variant's trial is finished already
    assert again.returncode == 0, again.stderr
    assert {t: r["started_at"] for t, r in records(tmp_path).items()} == {t: r["started_at"] for t, r in recs.items()}
    digests = {r["server"]["tools_digest"] for r in recs.values() if r["server"]}
    assert len(digests) == 1  # one server binary under three variants
    oracle = next(t for t in recs if t.startswith("scripted-oracle.files@same."))
    messages = json.loads((tmp_path / "runs/declared/trials" / oracle / "messages.json").read_text())
    first = next(m for m in messages if m.get("role") == "user")
    assert "The project's files are in /" in first["content"] and "{state}" not in first["content"]
    assert "sk-canary" not in json.dumps(messages)

    summary = json.loads((tmp_path / "runs/declared/summary.json").read_text())
    rows = {(r["model"], r["variant"]): r for r in summary["rows"] if r["service"] == "files"}
    assert rows[("scripted-oracle", "same")]["pass_at_1"] == 1.0
    assert rows[("scripted-oracle", "astray")]["pass_at_1"] == 0.0
    compared = {(c["model"], c["variant"]): c for c in summary["comparisons"]}
    assert compared[("scripted-oracle", "astray")]["difference"] == -1.0
    assert compared[("scripted-oracle", "astray")]["baseline"] == "same"  # the first listed
    assert compared[("scripted-oracle", "twin")]["difference"] == 0.0
    assert "files@astray" in done.stdout and "server variants against their baseline" in done.stdout

    folder = str(tmp_path / "runs" / "declared")
    gate = mcpfleet("compare", folder, "--baseline", "same", "--fail-if-worse", "0.2")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "astray" in gate.stderr and "twin" not in gate.stderr
    narrowed = tmp_path / "twins"
    shutil.copytree(tmp_path / "runs" / "declared", narrowed)
    for name in os.listdir(narrowed / "trials"):
        if "@astray." in name:
            shutil.rmtree(narrowed / "trials" / name)
    (narrowed / "summary.json").unlink()
    ok = mcpfleet("compare", str(narrowed), "--baseline", "same", "--fail-if-worse", "0.2")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    unknown = mcpfleet("compare", folder, "--baseline", "nope")
    assert unknown.returncode != 0 and "files@astray" in unknown.stderr
    exported = mcpfleet("export", folder, str(tmp_path / "results"))
    assert exported.returncode == 0, exported.stderr
    folders = sorted(p.name for p in (tmp_path / "results" / "declared").iterdir() if p.is_dir())
    assert folders == sorted(f"{m}@{v}__files" for m in ("scripted-noop", "scripted-oracle") for v in variants)
    page = tmp_path / "report.html"
    shown = mcpfleet("report", folder, "-o", str(page))
    assert shown.returncode == 0, shown.stderr
    html = page.read_text()
    assert "<td>files@astray</td>" in html and 'class="summary variants"' in html
    assert 'data-model="scripted-oracle" data-variant="astray" data-difference="-1' in html


def test_a_declared_server_gets_only_the_safe_environment_and_its_declared_variables(tmp_path: Path) -> None:
    """The server's environment is SAFE_ENV plus its declared env: no provider key, no cloud credentials. The
    declared command is a wrapper (a path relative to service.yaml) that records its environment in the state,
    which the verifier reads."""
    declaration = {**DECLARATION, "server": {"command": "bin/wrapped", "args": ["{state}"], "env": {"MARK": "m1"}}}
    pack = make_pack(tmp_path, declaration, tasks=1)
    wrapper = pack / "files" / "bin" / "wrapped"
    wrapper.parent.mkdir()
    exe = REPO / "servers" / "node_modules" / ".bin" / "mcp-server-filesystem"
    wrapper.write_text(f'#!/bin/sh\nenv > "$1/.seen-env"\nexec {exe} "$1"\n')
    wrapper.chmod(0o755)
    task = next((pack / "files" / "standard" / CATEGORY).iterdir())
    verify = task / "verify.py"
    verify.write_text(
        textwrap.dedent(
            """\
            import os, sys
            seen = open(os.path.join(os.environ["FILESYSTEM_TEST_DIR"], ".seen-env")).read()
            bad = [k for k in ("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "MCPFLEET_CANARY") if k + "=" in seen]
            sys.exit(1 if bad or "MARK=m1" not in seen or "canary" in seen else 0)
            """
        )
    )
    run = write_run(tmp_path, pack, models=[{"name": "oracle", "model": "scripted/oracle"}])
    canaries = {"OPENAI_API_KEY": "sk-canary", "AWS_SECRET_ACCESS_KEY": "canary", "MCPFLEET_CANARY": "canary"}
    done = mcpfleet("run", str(run), "--no-progress", env=canaries)
    assert done.returncode == 0, done.stdout + done.stderr
    [rec] = records(tmp_path).values()
    assert rec["passed"] is True, rec["verifier"]
    assert rec["variant"] is None and rec["server"]["name"] == "secure-filesystem-server"


BAD = [
    ("unknown key", {**DECLARATION, "serverz": {}}, "unknown key 'serverz'"),
    ("no command", {**DECLARATION, "server": {"args": ["{state}"]}}, "give exactly one of command"),
    (
        "state in a stateless service",
        {**DECLARATION, "state": {"kind": "none"}},
        "server.args[0] uses {state} but state.kind is none",
    ),
    (
        "unknown backing port",
        {**DECLARATION, "server": {"command": "x", "args": ["{port:db}"]}},
        "names {port:db}, which is no backing service",
    ),
    ("a bundled name", None, "declares 'filesystem', which is a bundled service"),
]


@pytest.mark.parametrize(("declaration", "expected"), [(d, e) for _, d, e in BAD], ids=[i for i, _, _ in BAD])
def test_a_bad_declaration_is_one_error_naming_the_file_and_key(
    tmp_path: Path, declaration: dict[str, Any] | None, expected: str
) -> None:
    pack = make_pack(tmp_path, declaration, service="filesystem" if declaration is None else "files", tasks=1)
    run = write_run(tmp_path, pack)
    done = mcpfleet("validate", str(run), timeout=120)
    assert done.returncode != 0
    assert expected in done.stderr and "service.yaml" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ([{"name": "a", "service": "nope"}], "spec.servers[0] (a): service 'nope' is not a service the pack declares"),
        ([{"name": "a", "service": "filesystem"}], "is bundled; variants are for services a pack declares"),
        ([{"name": "a", "service": "files"}, {"name": "a", "service": "files"}], "'a' appears twice"),
        ([{"name": "Bad_Name", "service": "files"}], "spec.servers[0].name"),
    ],
)
def test_a_bad_variant_is_refused_before_any_trial(
    tmp_path: Path, servers: list[dict[str, Any]], expected: str
) -> None:
    pack = make_pack(tmp_path, tasks=1)
    run = write_run(tmp_path, pack, servers)
    done = mcpfleet("run", str(run), "--no-progress", timeout=120)
    assert done.returncode != 0
    assert expected in done.stderr, done.stderr
    assert not (tmp_path / "runs" / "declared" / "trials").exists() or not os.listdir(
        tmp_path / "runs" / "declared" / "trials"
    )


def test_a_backing_site_runs_for_each_trial_until_its_verifier_is_done_and_then_goes(tmp_path: Path) -> None:
    """A bundled site (the shop) declared as the trial's backing service: started before the MCP server on a port
    of its own, named by {port:shop} in the verifier's env, serving while the verifier reads it, gone after."""
    shop = tmp_path / "shop"
    declaration = {
        **DECLARATION,
        "verifier": {"env": {"FILESYSTEM_TEST_DIR": "{state}", "SHOP_URL": "http://127.0.0.1:{port:shop}/"}},
        "backing": [
            {
                "name": "shop",
                "command": [
                    sys.executable,
                    "-m",
                    "mcpfleet.sites.shop",
                    "--data",
                    str(shop),
                    "--port",
                    "{port:shop}",
                ],
                "readiness": {"httpGet": "/"},
            }
        ],
    }
    pack = make_pack(tmp_path, declaration, tasks=1)
    seeded = subprocess.run(
        [sys.executable, "-m", "mcpfleet.sites", "seed", "shop", str(shop)], capture_output=True, text=True
    )
    assert seeded.returncode == 0, seeded.stderr
    task = next((pack / "files" / "standard" / CATEGORY).iterdir())
    original = (task / "verify.py").read_text()
    (task / "verify.py").write_text(  # the site must answer while the verifier runs, then the task's own checks
        "import os, urllib.request\n"
        "with urllib.request.urlopen(os.environ['SHOP_URL'], timeout=10) as r:\n"
        "    assert r.status == 200 and b'<html' in r.read().lower()\n" + original
    )
    run = write_run(tmp_path, pack, models=[{"name": "oracle", "model": "scripted/oracle"}])
    done = mcpfleet("run", str(run), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    [rec] = records(tmp_path).values()
    assert rec["passed"] is True, rec["verifier"]
    assert processes_naming(str(shop)) == []


def test_paired_comparison_counts_flips_and_bounds_the_difference() -> None:
    def rec(variant: str, task: str, attempt: int, passed: bool, tokens: int = 100) -> dict[str, Any]:
        return {
            "model": "m",
            "service": "s",
            "variant": variant,
            "task_id": f"s/e/c/{task}",
            "attempt": attempt,
            "passed": passed,
            "failure": None if passed else "verifier_failed",
            "totals": {"input_tokens": tokens, "output_tokens": 0, "turns": 2, "tool_calls": 1},
        }

    recs = [rec("old", f"t{i}", a, True) for i in range(10) for a in (1, 2)]
    recs += [rec("new", f"t{i}", a, i >= 6, tokens=150) for i in range(10) for a in (1, 2)]
    recs += [rec("new", "t0", 3, True)]  # no pair: left out
    recs += [{**rec("old", "t9", 3, False), "failure": "provider_error"}]  # not scored: left out
    [c] = compare(recs, "s", "old", "new")
    assert c["pairs"] == 20 and c["tasks"] == 10
    assert c["baseline_pass_at_1"] == 1.0 and c["variant_pass_at_1"] == pytest.approx(0.4)
    assert c["difference"] == pytest.approx(-0.6)
    low, high = c["ci95"]
    assert -1.0 <= low < -0.6 < high < 0
    assert c["flipped_down"] == [f"s/e/c/t{i}" for i in range(6)] and c["flipped_up"] == []
    assert c["delta_tokens"] == pytest.approx(50)
    assert worse_than([c], 0.1) == [c] and worse_than([c], 0.5) == []
    assert c["mcnemar_p"] == pytest.approx(mcnemar_exact(12, 0)) and c["mcnemar_p"] < 0.001
    assert mcnemar_exact(3, 3) == 1.0
    assert paired_bootstrap({"a": [0.0], "b": [0.0]}) == (0.0, 0.0)


def test_a_declared_servers_trial_pod_runs_its_image_and_each_variant_its_own(tmp_path: Path) -> None:
    """On Kubernetes the declared server is the pod's MCP sidecar from the declaration's image, with its args
    ({state} as the pod's state mount); a variant with an image of its own gets that one."""
    server = {"command": "mcp-server-filesystem", "args": ["{state}"], "image": "registry.example/files:new"}
    declaration = {**DECLARATION, "server": server}
    pack = make_pack(tmp_path, declaration, tasks=1)
    servers = [
        {"name": "new", "service": "files"},
        {"name": "old", "service": "files", "image": "registry.example/files:old"},
    ]
    run = write_run(tmp_path, pack, servers, models=[{"name": "oracle", "model": "scripted/oracle"}])
    done = mcpfleet("pods", str(run), "-o", "json", timeout=120)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    pods = listed["items"] if isinstance(listed, dict) and "items" in listed else listed
    images = {}
    for pod in pods:
        trial = pod["metadata"]["annotations"]["mcpfleet.io/trial-id"]
        [sidecar] = [c for c in pod["spec"]["initContainers"] if c["name"] == "mcp-files"]
        images[trial.split(".")[1]] = sidecar["image"]
        assert sidecar["args"][-3:] == ["--", "mcp-server-filesystem", "/state"]  # through the FIFO bridge
    assert images == {"files@new": "registry.example/files:new", "files@old": "registry.example/files:old"}


def test_servers_inspect_prints_the_tools_and_their_cost_and_fails_on_a_server_that_does_not_start(
    tmp_path: Path,
) -> None:
    pack = make_pack(tmp_path, tasks=1)
    done = mcpfleet("servers", "inspect", str(pack / "files"), "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout)
    assert report["ok"] and report["name"] == "secure-filesystem-server"
    names = {t["function"]["name"] for t in report["tools"]}
    assert {"read_text_file", "write_file", "list_allowed_directories"} <= names
    assert report["tokens"] > 200 and report["digest"].startswith("sha256:")

    broken = {**DECLARATION, "server": {"command": "false"}}
    (pack / "files" / "service.yaml").write_text(yaml.safe_dump(broken))
    done = mcpfleet("servers", "inspect", str(pack / "files"), timeout=120)
    assert done.returncode == 1 and "files:" in done.stderr, done.stderr


def test_tasks_new_scaffolds_a_task_that_validate_refuses_until_it_is_filled_in(tmp_path: Path) -> None:
    pack = make_pack(tmp_path, tasks=1)
    done = mcpfleet("tasks", "new", str(pack / "files" / CATEGORY / "write_notes"))
    assert done.returncode == 0, done.stderr
    task = pack / "files" / "standard" / CATEGORY / "write_notes"
    assert "FILESYSTEM_TEST_DIR" in (task / "verify.py").read_text()  # the declaration's verifier variables
    assert json.loads((task / "meta.json").read_text())["mcp"] == ["files"]
    before = mcpfleet("tasks", "validate", str(task), timeout=180)
    assert before.returncode == 1 and "oracle.json: no steps; list the tool calls" in before.stdout + before.stderr

    (task / "oracle.json").write_text(
        json.dumps({"steps": [{"tool": "write_file", "arguments": {"path": "{root}/NOTES.md", "content": "ok\n"}}]})
    )
    (task / "verify.py").write_text(
        "import os, pathlib, sys\n"
        "p = pathlib.Path(os.environ['FILESYSTEM_TEST_DIR'], 'NOTES.md')\n"
        "sys.exit(0 if p.is_file() and p.read_text() == 'ok\\n' else 1)\n"
    )
    after = mcpfleet("tasks", "validate", str(task), timeout=180)
    assert after.returncode == 0, after.stdout + after.stderr
    again = mcpfleet("tasks", "new", str(pack / "files" / CATEGORY / "write_notes"))
    assert again.returncode == 2 and "exists already" in again.stderr


def test_the_memory_example_validates_and_runs_its_two_pinned_versions_as_variants(tmp_path: Path) -> None:
    """The example pack of a third-party server (@modelcontextprotocol/server-memory, declared only in its
    service.yaml): every task's oracle passes, its no-op fails and its mutants are rejected; the example EvalRun
    runs it on both pinned versions, whose records tell the two servers apart."""
    pack = REPO / "examples" / "packs" / "memory-pack"
    checked = mcpfleet("tasks", "validate", str(pack), "--concurrency", "3", timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "6/6 tasks valid" in checked.stdout
    doc = yaml.safe_load((REPO / "examples" / "memory-variants.yaml").read_text())
    doc["spec"]["tasks"]["path"] = str(pack)
    doc["spec"]["output"]["uri"] = str(tmp_path / "runs")
    for entry in doc["spec"]["servers"]:
        if "command" in entry:
            entry["command"] = str((REPO / "examples" / entry["command"]).resolve())
    run = tmp_path / "memory.yaml"
    run.write_text(yaml.safe_dump(doc))
    done = mcpfleet("run", str(run), "--no-progress", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "runs" / "memory-variants" / "summary.json").read_text())
    servers = summary["servers"]
    assert set(servers) == {"memory@memory-new", "memory@memory-old"}
    [new], [old] = list(servers["memory@memory-new"]), list(servers["memory@memory-old"])
    assert new != old  # same name and version (memory-server 0.6.3): told apart by their tools' digests
    oracle = {c["variant"]: c for c in summary["comparisons"] if c["model"] == "scripted-oracle"}
    assert oracle["memory-old"]["difference"] == 0.0 and oracle["memory-old"]["delta_tokens"] < 0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, "set server.image in "),
        (
            {
                "backing": [
                    {"name": "web", "command": ["true"], "image": "registry.example/web:1", "readiness": {"tcp": True}}
                ]
            },
            "backing[web] needs port in a trial pod",
        ),
    ],
    ids=["no image", "backing without port"],
)
def test_a_declaration_a_pod_cannot_run_is_refused_naming_the_key(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    server = {"command": "mcp-server-filesystem", "args": ["{state}"]}
    if change:
        server["image"] = "registry.example/files:1"
    pack = make_pack(tmp_path, {**DECLARATION, "server": server, **change}, tasks=1)
    run = write_run(tmp_path, pack, models=[{"name": "oracle", "model": "scripted/oracle"}])
    done = mcpfleet("pods", str(run), timeout=120)
    assert done.returncode != 0 and expected in done.stderr, done.stderr
    assert "service.yaml" in done.stderr and "Traceback" not in done.stderr


def test_sigkill_of_a_run_leaves_no_declared_server_or_backing_service_running(tmp_path: Path) -> None:
    """The declared server (in its sandbox) and its trial's backing site die with a SIGKILLed `mcpfleet run`."""
    import signal
    import time

    shop, tmp = tmp_path / "shop", tmp_path / "tmp"
    tmp.mkdir()
    backing = {
        "name": "shop",
        "command": [sys.executable, "-m", "mcpfleet.sites.shop", "--data", str(shop), "--port", "{port:shop}"],
        "readiness": {"httpGet": "/"},
    }
    pack = make_pack(tmp_path, {**DECLARATION, "backing": [backing]}, tasks=2)
    seeded = subprocess.run([sys.executable, "-m", "mcpfleet.sites", "seed", "shop", str(shop)], capture_output=True)
    assert seeded.returncode == 0
    run = write_run(tmp_path, pack, models=[{"name": "slow", "model": "scripted/oracle?latency=2"}])
    proc = subprocess.Popen(
        [str(MCPFLEET), "run", str(run), "--no-progress"],
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = [c for _, c in processes_naming(str(tmp))]
            if any("mcp-server-filesystem" in c for c in running) and processes_naming(str(shop)):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"the declared server and its site never ran together: {processes_naming(str(tmp))}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while (processes_naming(str(tmp)) or processes_naming(str(shop))) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not processes_naming(str(tmp)) and not processes_naming(str(shop)), processes_naming(str(tmp))
    finally:
        for pid, _ in processes_naming(str(tmp)) + processes_naming(str(shop)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()


def test_a_variant_whose_server_changed_mid_run_is_named() -> None:
    from mcpfleet.runner.report.summary import mixed_servers, server_counts

    def rec(variant: str, version: str) -> dict[str, Any]:
        server = {"name": "s", "version": version, "tools_digest": f"sha256:{version}"}
        return {"service": "shop", "variant": variant, "server": server}

    counts = server_counts([rec("a", "1"), rec("a", "1"), rec("b", "1"), rec("b", "2")])
    assert counts == {"shop@a": {"s 1 sha256:1": 2}, "shop@b": {"s 1 sha256:1": 1, "s 2 sha256:2": 1}}
    [note] = mixed_servers({"servers": counts})
    assert note.startswith("shop@b: its trials measured 2 different servers")


def test_an_override_of_a_bundled_service_is_its_packs_alone(tmp_path: Path) -> None:
    """spec.tasks.overrideServices lets a pack's declaration take a bundled name for its own trials; another pack
    in the same process (the operator runs many) still gets the bundled service."""
    from mcpfleet.runner.services import BUNDLED, get_service, register_pack, service_of
    from mcpfleet.runner.services.declared import DeclaredService

    pack = make_pack(tmp_path / "a", service="filesystem", tasks=1)
    other = make_pack(tmp_path / "b", tasks=1)  # declares "files" only
    register_pack(pack, ["filesystem"])
    assert isinstance(service_of("filesystem", pack), DeclaredService)
    assert (
        service_of("filesystem", other) is BUNDLED["filesystem"] and get_service("filesystem") is BUNDLED["filesystem"]
    )

    run = write_run(tmp_path, pack, models=[{"name": "oracle", "model": "scripted/oracle"}])
    refused = mcpfleet("validate", str(run), timeout=120)
    assert refused.returncode != 0 and "spec.tasks.overrideServices: [filesystem]" in refused.stderr
    doc = yaml.safe_load(run.read_text())
    doc["spec"]["tasks"]["overrideServices"] = ["filesystem"]
    run.write_text(yaml.safe_dump(doc))
    done = mcpfleet("run", str(run), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    [rec] = records(tmp_path).values()
    assert rec["passed"] is True
    tid = rec["trial_id"]
    messages = json.loads((tmp_path / "runs" / "declared" / "trials" / tid / "messages.json").read_text())
    assert "The project's files are in /" in json.dumps(messages)  # the declaration's prompt: its server ran


def test_a_server_that_is_not_installed_is_refused_before_any_trial(tmp_path: Path) -> None:
    pack = make_pack(tmp_path, {**DECLARATION, "server": {"command": "mcp-server-nowhere", "args": []}}, tasks=1)
    done = mcpfleet("validate", str(write_run(tmp_path, pack)), timeout=120)
    assert done.returncode != 0
    assert "service.yaml: server.command: 'mcp-server-nowhere' is not on PATH" in done.stderr, done.stderr
    pack = make_pack(tmp_path / "v", tasks=1)
    servers = [{"name": "old", "service": "files", "command": "./old/bin/server"}]
    done = mcpfleet("run", str(write_run(tmp_path / "v", pack, servers)), "--no-progress", timeout=120)
    assert done.returncode != 0 and "spec.servers[old].command: './old/bin/server'" not in done.stderr
    assert "spec.servers[old].command:" in done.stderr and "is not an executable file" in done.stderr, done.stderr
    assert not (tmp_path / "v" / "runs" / "declared" / "trials").exists()
