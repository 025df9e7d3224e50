"""Services declare their trial pods' sidecars (Service.pod_sidecars): a browser task through the operator runs in
a pod whose site and playwright-mcp sidecars the test kubelet starts as processes, and leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import shutil
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import kubernetes_validate
import pytest
from kubeemu import RunningEmulator, run_kopf_in_thread
from kubelet import BIN_PATH, Kubelet
from pgpack import make_pg_pack
from proctree import processes_naming
from support import NS, evalrun, infra_errors, s3_keys, status_of, wait_until

from mcpfleet.operator.manifests import trial_pod
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.runner.launch.scripted_model import ScriptedServerProcess
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.services import playwright
from mcpfleet.runner.services.pgpod import POD_DATABASE, POD_ROLE
from mcpfleet.runner.services.postgres import PostgresService
from mcpfleet.runner.spec.load import parse_evalrun
from mcpfleet.runner.spec.task import Task
from mcpfleet.runner.tasks.discovery import find_task

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
BROWSER_TASK = "playwright/easy/shop_account/wishlist_add_two"
CROSS_SITE_TASK = "playwright/standard/cross_site/cast_iron_restock"


def pod_for(task: str, service_pod: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = evalrun("pods", TASKS, "http://s3.test", "bucket", attempts=1, tasks={"path": str(TASKS), "include": [task]})
    if service_pod:
        doc["spec"]["pod"] = service_pod
    run = parse_evalrun(doc)
    [trial, *_] = plan(run, REPO)
    return trial_pod(run, trial, OperatorSettings())


def test_each_service_renders_its_own_sidecars_and_the_pods_validate() -> None:
    fs = pod_for("filesystem/standard/team_project/*")["spec"]["initContainers"]
    assert [c["name"] for c in fs] == ["state", "mcp-filesystem"]  # the default: a stdio server behind supergateway
    assert fs[1]["command"] == ["mcpfleet-gateway"]  # supergateway on the pod's loopback only
    assert fs[1]["args"][:2] == ["--host", "127.0.0.1"]
    browser = pod_for(CROSS_SITE_TASK)
    sites = playwright.task_sites(find_task(TASKS, CROSS_SITE_TASK))
    assert len(sites) >= 2  # a cross-site task: one sidecar per site it names, then the MCP server
    names = [c["name"] for c in browser["spec"]["initContainers"]]
    assert names == ["state", *(f"site-{s}" for s in sites), "mcp-playwright"]
    sidecars = browser["spec"]["initContainers"][1:]
    assert all(c["restartPolicy"] == "Always" and c["startupProbe"] for c in sidecars)
    # Every container is locked down and sized like the filesystem sidecar (Pod Security "restricted").
    assert all(c["securityContext"]["allowPrivilegeEscalation"] is False for c in sidecars)
    assert all(c["securityContext"]["capabilities"] == {"drop": ["ALL"]} for c in sidecars)
    assert browser["spec"]["initContainers"][-1]["image"] == OperatorSettings().sidecar_images["playwright"]
    runner = browser["spec"]["containers"][0]
    assert runner["args"][:2] == ["--mcp-url", "http://127.0.0.1:$(MCP_PORT)/mcp"]
    for pod in (browser, pod_for("filesystem/standard/team_project/*")):
        kubernetes_validate.validate(pod, "1.37.0", strict=True)


async def test_a_browser_task_runs_through_the_operator_with_its_sites_as_sidecars(
    kube: RunningEmulator, operator_env: None, s3: str, bucket: str
) -> None:
    body = evalrun(
        "browser",
        TASKS,
        s3,
        bucket,
        attempts=1,
        concurrency={"total": 2},
        tasks={"path": str(TASKS), "include": [BROWSER_TASK]},
        limits={"timeoutSeconds": 300, "llmTimeoutSeconds": 60, "verifierTimeoutSeconds": 60},
    )
    # Each container's TMPDIR is its pod's /tmp volume, as a node's /tmp is (tmp_env): playwright-mcp's socket
    # folder (pw-<hash> under the temp folder) goes with the pod, not into the host's /tmp. The node's folder is
    # short, not under tmp_path: Chromium's socket in that temp folder must stay under 108 characters.
    # Whose folder a pw-* in the host's /tmp is cannot be told afterwards (another worker's browser test may have one
    # there), so the pod's processes are looked at while they run: every process of the playwright-mcp sidecar
    # (the gateway, node and playwright-mcp: what makes that folder, under node's os.tmpdir()) has its TMPDIR in
    # its pod's folder.
    workdir = Path(tempfile.mkdtemp(prefix="k-", dir="/tmp"))  # removed by the kubelet
    tmpdirs: dict[str, str] = {}  # a browser-side process's command line -> its TMPDIR

    async def watch_tmpdirs() -> None:
        while True:
            for pid, cmd in processes_naming(str(workdir)):
                if "playwright" in cmd and "/chromium" not in cmd and " materialise " not in cmd:
                    with contextlib.suppress(OSError):
                        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                        tmpdirs[cmd] = next((e[7:].decode() for e in env if e.startswith(b"TMPDIR=")), "")
            await asyncio.sleep(0.2)

    async with Kubelet(kube.url, workdir=workdir, tmp_env=True) as kubelet:
        watcher = asyncio.create_task(watch_tmpdirs())
        with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
            kube.create(body)
            try:
                status = await wait_until(
                    lambda: (st := status_of(kube, "browser")).get("phase") == "Succeeded" and st, 300, "the run"
                )
            except AssertionError as exc:
                logs = {str(p): p.read_text(errors="replace")[-1500:] for p in workdir.glob("pod-*/*.log")}
                raise AssertionError(f"{exc}: {status_of(kube, 'browser')}\n{json.dumps(logs, indent=1)}") from None
            await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
        watcher.cancel()
    assert not infra_errors(s3, bucket), infra_errors(s3, bucket)
    assert status["counts"]["finished"] == 2 and status["counts"]["passed"] == 1
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    records = {}
    for key in s3_keys(s3, bucket):
        if key.endswith("/result.json") and "/trials/" in key:
            rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            records[rec["model"]] = rec
    assert records["oracle"]["passed"] and records["oracle"]["service"] == "playwright"
    assert not records["idle"]["passed"] and records["idle"]["failure"] != "infra_error"
    # The oracle drove the browser through the sidecar: its calls are browser tools, every one schema-valid.
    calls = [c["name"] for t in records["oracle"]["turns"] for c in t["tool_calls"]]
    assert "browser_navigate" in calls and records["oracle"]["totals"]["call_classes"] == {"schema_valid": len(calls)}
    # The record names the verifier's command as a local trial's does: the pod's folders as placeholders.
    verifier = records["oracle"]["verifier"]
    assert verifier["command"] == ["python", "{task}/verify.py"], verifier
    assert (
        verifier["env"]["MCP_MESSAGES"] == "{trial}/messages.json"
        and verifier["env"]["PLAYWRIGHT_WORK_DIR"] == "{trial}"
    )
    # One pod per trial, each with the site and playwright-mcp sidecars started and ready before the runner.
    assert len(kubelet.started) == 2
    assert all(kubelet.sidecars[p] == ["site-shop", "mcp-playwright"] for p in kubelet.started), kubelet.sidecars
    # The site and playwright-mcp listened on loopback only (the trial still reached both).
    ports = {"site-shop": playwright.POD_SITE_PORTS["shop"], "mcp-playwright": 8000}
    assert all(kubelet.bound[p] == {c: {port: ["127.0.0.1"]} for c, port in ports.items()} for p in kubelet.started), (
        kubelet.bound
    )
    # Nothing they started (sites, playwright-mcp, Chromium and its helpers) outlived its pod, or left a folder.
    assert not processes_naming(str(workdir))
    assert any("playwright" in cmd for cmd in tmpdirs), tmpdirs
    outside = {cmd: t for cmd, t in tmpdirs.items() if not t.startswith(f"{workdir}/")}
    assert not outside, outside


def prebuild_state(task: Task, root: Path) -> Path:
    """What the database image's build does for a state: its dump as `mcpfleet materialise` writes it, then
    `mcpfleet-pg-init --prebuild` for the agent's login (run as root, as the image's build runs it)."""
    dumps = root.parent / "pg-dumps"
    PostgresService().materialise(task, dumps)
    [dump] = dumps.iterdir()
    dump.chmod(0o644)
    dumps.chmod(0o755)
    env = {"PATH": BIN_PATH, "LANG": "C.UTF-8", "TZ": "UTC", "DB_NAME": POD_DATABASE, "DB_USER": POD_ROLE}
    subprocess.run(
        ["mcpfleet-pg-init", "--prebuild", str(dump), str(root), "-c", "fsync=off"], env=env, check=True, timeout=120
    )
    return root


def pg_pod(pack: Path, task: str) -> dict[str, Any]:
    doc = evalrun("pg", pack, "http://s3.test", "bucket", attempts=1, tasks={"path": str(pack), "include": [task]})
    run = parse_evalrun(doc)
    [trial, *_] = plan(run, pack)
    return trial_pod(run, trial, OperatorSettings())


def test_a_postgres_pod_builds_its_database_then_serves_it_and_postgres_mcp(tmp_path: Path) -> None:
    pack = make_pg_pack(tmp_path / "pack")
    pod = pg_pod(pack, "postgres/standard/shop/add_total")
    kubernetes_validate.validate(pod, "1.37.0", strict=True)
    inits = pod["spec"]["initContainers"]
    assert [c["name"] for c in inits] == ["state", "pg-init", "postgres", "mcp-postgres"]
    state, init, db, mcp = inits
    assert "restartPolicy" not in init and db["restartPolicy"] == mcp["restartPolicy"] == "Always"
    settings = OperatorSettings().sidecar_images
    assert init["image"] == db["image"] == settings["postgres-db"] and mcp["image"] == settings["postgres"]
    env = {e["name"]: e["value"] for e in init["env"]}
    # The generator's output, as `mcpfleet materialise` names it in the state volume; a login of the trial's own.
    assert env["STATE_DUMP"] == "/state/shop.sql" and env["DB_USER"] == "agent"
    assert db["startupProbe"]["exec"]["command"][0] == "pg_isready"
    # pg-init's temporary server runs with the sidecar's settings (one list, the local cluster's).
    # The sidecar's listens on the pod's loopback only (pg-init's temporary server on no TCP address at all).
    assert db["args"] == [*init["args"], "-c", "listen_addresses=127.0.0.1"] and "fsync=off" in init["args"]
    # No password in the pod spec: postgres-mcp reads it from the pgpass file pg-init wrote.
    mcp_env = {e["name"]: e["value"] for e in mcp["env"]}
    assert mcp_env["DATABASE_URI"] == "postgresql://agent@127.0.0.1:$(PGPORT)/trial"
    assert mcp_env["PGPASSFILE"] == "/state/.postgres/pgpass"
    assert {"name": "pgdata", "emptyDir": {"sizeLimit": "2Gi"}} in pod["spec"]["volumes"]
    # A task that manages roles gets the superuser of the pod's own cluster, as it gets a cluster locally.
    cluster = pg_pod(pack, "postgres/standard/shop/audit_role")["spec"]["initContainers"][1]
    assert {e["name"]: e["value"] for e in cluster["env"]}["DB_USER"] == "postgres"
    # An EvalRun's own database image wins over the operator's.
    doc = evalrun("pg", pack, "http://s3.test", "bucket", attempts=1, tasks={"path": str(pack)})
    doc["spec"]["pod"] = {"sidecarImages": {"postgres-db": "registry.example/pg:15.14"}}
    run = parse_evalrun(doc)
    assert trial_pod(run, plan(run, pack)[0], OperatorSettings())["spec"]["initContainers"][1]["image"] == (
        "registry.example/pg:15.14"
    )


async def test_postgres_tasks_run_through_the_operator_with_the_database_as_a_sidecar(
    kube: RunningEmulator,
    operator_env: None,
    s3: str,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pack = make_pg_pack(tmp_path / "pack")
    workdir = Path(tempfile.mkdtemp(prefix="pg-node-"))  # not under tmp_path: PostgreSQL drops root, must reach it
    workdir.chmod(0o711)
    oracle = ExitStack()
    monkeypatch.setenv("MCPFLEET_SCRIPTED_URL", oracle.enter_context(ScriptedServerProcess([pack])))  # knows the pack
    body = evalrun(
        "pg",
        pack,
        s3,
        bucket,
        attempts=1,
        concurrency={"total": 3},
        limits={"timeoutSeconds": 300, "llmTimeoutSeconds": 60, "verifierTimeoutSeconds": 60},
    )
    try:
        # The database image's prebuilt directory for the pack's state and the agent's login (the two tasks that
        # share nothing cluster-wide); the task that gets the superuser restores the dump.
        shop = find_task(pack, "postgres/standard/shop/add_total")
        prebuilt = await asyncio.to_thread(prebuild_state, shop, workdir / "pg-prebuilt")
        async with Kubelet(kube.url, workdir=workdir, extra_env={"MCPFLEET_PG_PREBUILT": str(prebuilt)}) as kubelet:
            with run_kopf_in_thread("mcpfleet.operator.handlers", kube.kubeconfig_path, namespace=NS):
                kube.create(body)
                try:
                    status = await wait_until(
                        lambda: (st := status_of(kube, "pg")).get("phase") == "Succeeded" and st, 300, "the run"
                    )
                except AssertionError as exc:
                    logs = {str(p): p.read_text(errors="replace")[-1500:] for p in workdir.glob("pod-*/*.log")}
                    raise AssertionError(f"{exc}: {status_of(kube, 'pg')}\n{json.dumps(logs, indent=1)}") from None
                await wait_until(lambda: not kube.objects("pods", NS), 30, "every pod to be deleted")
            assert not infra_errors(s3, bucket), infra_errors(s3, bucket)
            client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
            records = {}
            for key in s3_keys(s3, bucket):
                if key.endswith("/result.json") and "/trials/" in key:
                    rec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
                    records[(rec["model"], rec["task_id"].rsplit("/", 1)[-1])] = rec
            outcomes = {k: (r.get("failure"), r.get("error"), r["verifier"].get("stdout")) for k, r in records.items()}
            assert status["counts"]["finished"] == 6 and status["counts"]["passed"] == 3, outcomes
            # The oracle's SQL went through postgres-mcp in its sidecar, the verifier read the pod's database.
            for task in ("add_total", "count_big", "audit_role"):
                assert records[("oracle", task)]["passed"], records[("oracle", task)]
                assert not records[("idle", task)]["passed"] and records[("idle", task)]["failure"] != "infra_error"
            calls = [c["name"] for t in records[("oracle", "add_total")]["turns"] for c in t["tool_calls"]]
            assert calls == ["list_objects", "execute_sql"]
            assert all(kubelet.sidecars[p] == ["postgres", "mcp-postgres"] for p in kubelet.started), kubelet.sidecars
            # The database and postgres-mcp's gateway listened on loopback only.
            loopback = {"postgres": {5432: ["127.0.0.1"]}, "mcp-postgres": {8000: ["127.0.0.1"]}}
            assert all(kubelet.bound[p] == loopback for p in kubelet.started), kubelet.bound
            # Each pod took the path its state and login allow: 2 models x (2 tasks prebuilt, 1 from the dump).
            paths = sorted(kubelet.init_logs[p]["pg-init"].split(": ")[1].split(" ")[0] for p in kubelet.started)
            assert paths == ["no"] * 2 + ["prebuilt"] * 4, {p: kubelet.init_logs[p]["pg-init"] for p in kubelet.started}
            # No PostgreSQL, postgres-mcp or supergateway outlived its pod.
            assert not processes_naming(str(workdir))
            # The database's login never reached the records.
            texts = [client.get_object(Bucket=bucket, Key=k)["Body"].read().decode() for k in s3_keys(s3, bucket)]
            assert not any("pgpass" in t for t in texts)
            # ... the verifier's variables name it, never its value (issue 49: the verifier's command recorded).
            shown = ['"POSTGRES_PASSWORD": "[secret]"', '"PGPASSWORD": "[secret]"']
            assert not any("PASSWORD" in functools.reduce(lambda t, s: t.replace(s, ""), shown, t) for t in texts)
            for rec in records.values():
                assert rec["verifier"]["command"][:2] == ["python", "{task}/verify.py"], rec["verifier"]
                assert rec["verifier"]["env"]["POSTGRES_PASSWORD"] == "[secret]", rec["verifier"]
    finally:
        oracle.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}


def test_grading_happens_on_a_volume_no_sidecar_mounts(tmp_path: Path) -> None:
    """Issue 48: the verifier's HOME was /tmp, the volume every sidecar (the MCP server, the browser, the sites)
    mounts, so whatever an agent-driven process left there could be imported into it. Every service's pod gives
    the runner a grading volume of its own for its HOME and temp folder (the verifier's fresh folders go in it);
    no other container mounts it. A PostgreSQL pod's superuser login, which the runner grades with, is on a volume
    only pg-init (which writes it) and the runner mount."""
    pack = make_pg_pack(tmp_path / "pack")
    pods = {
        "filesystem": pod_for("filesystem/standard/team_project/*"),
        "playwright": pod_for(CROSS_SITE_TASK),
        "postgres": pg_pod(pack, "postgres/standard/shop/add_total"),
        "postgres-cluster": pg_pod(pack, "postgres/standard/shop/audit_role"),
    }
    for name, pod in pods.items():
        kubernetes_validate.validate(pod, "1.37.0", strict=True)
        [runner] = pod["spec"]["containers"]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert "emptyDir" in volumes["grading"], name
        grading = _mounts(runner)["grading"]
        env = {e["name"]: e.get("value") for e in runner["env"]}
        assert env["HOME"] == grading and env["TMPDIR"] == grading, (name, env)
        others = pod["spec"]["initContainers"]
        assert others, name
        for c in others:
            assert "grading" not in _mounts(c), (name, c["name"])
            assert not any(str(m).startswith(grading) for m in _mounts(c).values()), (name, c["name"])
        if name.startswith("postgres"):
            admin = [c["name"] for c in others if "pg-admin" in _mounts(c)]
            assert admin == ["pg-init"] and "pg-admin" in _mounts(runner), (name, admin)
            assert {m["name"]: m.get("readOnly") for m in runner["volumeMounts"]}["pg-admin"] is True
