"""The S3 results store against a real S3-protocol server (moto_server, started by the tests themselves).

Layout and keys, result.json written last, idempotent rewrites, pagination past 1000 trials, discarding
unfinished trials, retries of transient errors, a bounded and credential-free failure when the endpoint
is down, and ``mcpfleet run`` end to end with records in a bucket (including a commit that fails).
"""

from __future__ import annotations

import json
import pickle
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.config import Config
from conftest import make_tiny_pack, trial_record
from s3server import FaultProxy, new_bucket

from mcpfleet.runner.launch.launcher import execute
from mcpfleet.runner.plan.expand import plan
from mcpfleet.runner.plan.history import read_history
from mcpfleet.runner.results import store as store_mod
from mcpfleet.runner.results.store import LocalStore, S3Store, S3Tuning, StoreError, open_store, store_config
from mcpfleet.runner.spec.evalrun import Output
from mcpfleet.runner.spec.load import load_evalrun, parse_evalrun
from mcpfleet.runner.spec.trial import TrialContext
from mcpfleet.runner.trial.engine import run_trial

KEY_ID = "AKIAMCPFLEETTEST0042"
SECRET = "mcpfleet/Test+Secret/0123456789abcdefXYZ"
FAST = S3Tuning(max_attempts=2, op_attempts=2, backoff_s=0.01, connect_timeout=0.5, read_timeout=2)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for moto through the standard chain; nothing else from the host's AWS setup."""
    for var in store_mod.AWS_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def s3(s3_endpoint: str) -> Any:  # noqa: F811 - the fixture imported above
    """A plain boto3 client on moto, for setting up and inspecting buckets."""
    return boto3.client("s3", endpoint_url=s3_endpoint, config=Config(s3={"addressing_style": "path"}))


@pytest.fixture
def bucket(s3: Any) -> str:
    return new_bucket(s3)


def keys(s3: Any, bucket: str, prefix: str = "") -> list[str]:
    out: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.extend(o["Key"] for o in page.get("Contents", []))
    return sorted(out)


def record(trial_id: str, **extra: Any) -> bytes:
    return json.dumps(trial_record(trial_id, **extra)).encode()


def write_trial(st: S3Store, trial_id: str) -> None:
    st.write_files(trial_id, {"messages.json": b"[]", "meta.json": b"{}", "mcp_server.log": b"log"})
    st.commit(trial_id, record(trial_id))


# ------------------------------------------------------------------------------------------ layout


@pytest.mark.parametrize(
    ("prefix", "uid", "root"),
    [
        ("evals/nightly", "6f1c-uid", "evals/nightly/run-a/6f1c-uid"),
        ("evals/nightly", None, "evals/nightly/run-a"),
        ("/evals//nightly/", None, "evals/nightly/run-a"),  # slashes normalised: no //, no leading /
        ("", "u1", "run-a/u1"),
    ],
)
def test_layout_and_keys(
    s3_endpoint: str,
    s3: Any,
    bucket: str,
    prefix: str,
    uid: str | None,  # noqa: F811
    root: str,
) -> None:
    st = S3Store(bucket, prefix, "run-a", uid, endpoint_url=s3_endpoint)
    assert st.location() == f"s3://{bucket}/{root}"
    assert not st.exists()
    write_trial(st, "oracle.fs.t1.1")
    st.write_json("run.json", {"run": "run-a"})
    st.write_json("summary.json", {"rows": []})
    assert st.exists()
    assert keys(s3, bucket) == sorted(
        [
            f"{root}/run.json",
            f"{root}/summary.json",
            f"{root}/trials/oracle.fs.t1.1/mcp_server.log",
            f"{root}/trials/oracle.fs.t1.1/messages.json",
            f"{root}/trials/oracle.fs.t1.1/meta.json",
            f"{root}/trials/oracle.fs.t1.1/result.json",
        ]
    )
    head = s3.head_object(Bucket=bucket, Key=f"{root}/trials/oracle.fs.t1.1/result.json")
    assert head["ContentType"] == "application/json"
    assert st.read_json("summary.json") == {"rows": []} and st.read_json("absent.json") is None


def test_open_store_picks_the_backend_from_the_uri(s3_endpoint: str, bucket: str, tmp_path: Path) -> None:  # noqa: F811
    out = Output(uri=f"s3://{bucket}/p/q", endpoint_url=s3_endpoint, region="eu-west-3")
    st = open_store(out, "r", tmp_path, run_uid="abc")
    assert isinstance(st, S3Store) and st.location() == f"s3://{bucket}/p/q/r/abc"
    assert st.client.meta.endpoint_url == s3_endpoint and st.client.meta.region_name == "eu-west-3"
    assert st.client.meta.config.s3["addressing_style"] == "path"
    local = open_store("runs", "r", tmp_path)
    assert isinstance(local, LocalStore) and local.root == tmp_path / "runs" / "r"
    assert open_store(Output(uri="runs"), "r", tmp_path, run_uid="u").location() == str(tmp_path / "runs/r/u")

    # What a worker process gets: picklable, reopens the same store, never shows a credential.
    cfg = store_config(out, "r", tmp_path, "abc")
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg and again.open().location() == st.location()
    assert SECRET not in repr(cfg) and KEY_ID not in repr(cfg) and SECRET not in repr(st)


def test_an_earlier_runs_records_are_read_under_every_uid_but_the_readers(
    s3_endpoint: str,
    s3: Any,
    bucket: str,
    tmp_path: Path,  # noqa: F811
) -> None:
    """spec.launchOrder.learnFrom on S3: a named run's records under each UID (and without one), its other
    files and a stray deeper result.json ignored, the reading run's own UID skipped; same answer as a folder."""
    out = Output(uri=f"s3://{bucket}/evals", endpoint_url=s3_endpoint)
    times = {"started_at": "2026-11-01T10:00:00Z", "finished_at": "2026-11-01T10:01:00Z", "model": "m"}
    for uid, tid in (("u1", "a"), ("u2", "b"), (None, "c"), ("mine", "d")):
        st = open_store(out, "pilot", tmp_path, run_uid=uid)
        st.write_files(tid, {"meta.json": b"{}"})
        st.commit(tid, record(tid, task_id=f"t/{tid}", **times))
    s3.put_object(Bucket=bucket, Key="evals/pilot/u1/trials/a/extra/result.json", Body=record("x"))
    got = read_history(store_config(out, "new", tmp_path), ["pilot"], own_uid="mine")
    assert sorted(task for task, _, _ in got.samples) == ["t/a", "t/b", "t/c"] and not got.problems
    assert {seconds for _, _, seconds in got.samples} == {60.0}
    missing = read_history(store_config(out, "new", tmp_path), ["nothing-here"])
    assert not missing.samples and f"s3://{bucket}/evals/nothing-here" in missing.problems[0]


# ---------------------------------------------------------------------------- order and idempotence


def test_result_json_is_the_last_put_and_rewrites_are_idempotent(
    s3_endpoint: str,
    s3: Any,  # noqa: F811
    bucket: str,
) -> None:
    st = S3Store(bucket, "pre", "run", "uid", endpoint_url=s3_endpoint)
    puts: list[str] = []
    st.client.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: puts.append(params["Key"])
    )
    write_trial(st, "m.t.1")
    first = keys(s3, bucket)
    assert len(puts) == 4 and puts[-1] == "pre/run/uid/trials/m.t.1/result.json"
    assert set(puts) == set(first)

    puts.clear()
    write_trial(st, "m.t.1")  # the same trial again (a retry): the same keys, result.json last again
    assert keys(s3, bucket) == first and len(first) == 4
    assert puts[-1].endswith("/result.json") and set(puts) == set(first)
    assert st.read_result("m.t.1") == json.loads(record("m.t.1"))
    assert st.read_result("m.t.2") is None


def test_damaged_records_read_as_unfinished_like_the_local_stores(
    s3_endpoint: str,
    s3: Any,  # noqa: F811
    bucket: str,
) -> None:
    """A result.json put by hand that is not UTF-8, not JSON, or JSON but no object is no record."""
    st = S3Store(bucket, "dmg", "run", endpoint_url=s3_endpoint)
    st.commit("m.ok.1", record("m.ok.1"))
    damaged = {"m.latin.1": "d\u00e9j\u00e0".encode("latin-1"), "m.num.1": b"42", "m.list.1": b"[]", "m.cut.1": b'{"a'}
    # ... nor is a record of wrong types, with NaN in it, or of another trial (a copied prefix)
    good = trial_record("m.str.1")
    damaged["m.str.1"] = json.dumps({**good, "passed": "false"}).encode()
    damaged["m.att.1"] = json.dumps({**trial_record("m.att.1"), "attempt": "1"}).encode()
    damaged["m.nan.1"] = json.dumps(trial_record("m.nan.1", timings={"total": float("nan")})).encode()
    damaged["m.ok.1.bak"] = record("m.ok.1")
    for tid, body in damaged.items():
        s3.put_object(Bucket=bucket, Key=f"dmg/run/trials/{tid}/result.json", Body=body)
        assert st.read_result(tid) is None, tid
    assert [r["trial_id"] for r in st.iter_results()] == ["m.ok.1"]
    assert [r["trial_id"] for r in st.iter_results_below()] == ["m.ok.1"]


# ------------------------------------------------------------------- pagination, discard_unfinished


def test_iter_results_paginates_past_1000_and_discard_unfinished(
    s3_endpoint: str,
    s3: Any,  # noqa: F811
    bucket: str,
) -> None:
    st = S3Store(bucket, "big", "run", endpoint_url=s3_endpoint)
    ids = [f"m.t{i:04d}.1" for i in range(1010)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda t: st.commit(t, record(t)), ids))
        # Unfinished trials: files but no result.json (a crash or a failed commit).
        list(
            pool.map(
                lambda t: st.write_files(t, {"messages.json": b"[]", "meta.json": b"{}"}),
                [f"m.fs.std.cat.x{i}.1" for i in range(3)],
            )
        )
    s3.put_object(Bucket=bucket, Key="big/run/trials/stray.txt", Body=b"not a trial")
    # Not trial ids (another run's folder put under trials/, a user's notes): never this run's to delete.
    nested = ["big/run/trials/r5b/trials/m.fs.std.cat.t.1/messages.json", "big/run/trials/notes/todo.txt"]
    for key in nested:
        s3.put_object(Bucket=bucket, Key=key, Body=b"not ours")
    s3.put_object(Bucket=bucket, Key="big/run/trials/m.t0000.1/nested/result.json", Body=b"{}")
    s3.put_object(Bucket=bucket, Key="big/other-run/trials/m.o.1/result.json", Body=record("m.o.1"))

    lists: list[int] = []
    st.client.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: lists.append(1))
    got = list(st.iter_results())
    assert [r["trial_id"] for r in got] == ids  # sorted, complete, other runs excluded
    assert len(lists) >= 2  # more than one page
    assert st.read_result("m.t1009.1") == json.loads(record("m.t1009.1"))

    assert st.discard_unfinished() == 3  # the three unfinished trials; "stray.txt" is no trial folder
    left = keys(s3, bucket, "big/run/trials/")
    assert not [k for k in left if "/m.fs.std.cat.x" in k] and "big/run/trials/stray.txt" in left
    assert set(nested) <= set(left)
    assert sum(k.endswith("/result.json") for k in left) == 1011  # incl. the nested one, kept with its trial
    assert st.discard_unfinished() == 0
    assert keys(s3, bucket, "big/other-run/") == ["big/other-run/trials/m.o.1/result.json"]


# ----------------------------------------------------------------------------------- failures


def test_transient_5xx_answers_are_retried(s3_endpoint: str, s3: Any, bucket: str) -> None:  # noqa: F811
    failed: list[str] = []

    def first_two_fail(method: str, path: str) -> int | None:
        if method == "PUT" and len(failed) < 2:
            failed.append(path)
            return 503
        return None

    with FaultProxy(s3_endpoint, first_two_fail) as proxy:
        st = S3Store(
            bucket, "p", "run", endpoint_url=proxy.url, tuning=S3Tuning(max_attempts=3, op_attempts=1, backoff_s=0.01)
        )
        st.commit("m.t.1", record("m.t.1"))  # botocore's own retries absorb two 503s
        assert proxy.count(503) == 2 and proxy.count(None, "PUT", "/result.json") == 1
    assert keys(s3, bucket) == ["p/run/trials/m.t.1/result.json"]


def test_dropped_connections_are_retried_as_a_whole(s3_endpoint: str, s3: Any, bucket: str) -> None:  # noqa: F811
    drops: list[str] = []

    def drop_twice(method: str, path: str) -> str | None:
        if method == "PUT" and len(drops) < 2:
            drops.append(path)
            return "drop"
        return None

    with FaultProxy(s3_endpoint, drop_twice) as proxy:
        # No botocore retries at all: only the store's whole-operation retries can save the write.
        st = S3Store(
            bucket, "p", "run", endpoint_url=proxy.url, tuning=S3Tuning(max_attempts=1, op_attempts=3, backoff_s=0.01)
        )
        st.write_json("summary.json", {"ok": True})
        assert proxy.count("drop") == 2 and proxy.count(None, "PUT") == 1
    assert json.loads(s3.get_object(Bucket=bucket, Key="p/run/summary.json")["Body"].read()) == {"ok": True}


def test_endpoint_down_raises_store_error_quickly_without_credentials() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    st = S3Store("some-bucket", "p", "run", "uid", endpoint_url=dead, tuning=FAST)
    ops = [
        lambda: st.commit("m.t.1", record("m.t.1")),
        lambda: st.write_files("m.t.1", {"messages.json": b"[]"}),
        lambda: st.read_result("m.t.1"),
        lambda: list(st.iter_results()),
        lambda: st.write_json("summary.json", {}),
        st.discard_unfinished,
    ]
    for op in ops:
        t = time.monotonic()
        with pytest.raises(StoreError) as info:
            op()
        assert time.monotonic() - t < 5
        msg = str(info.value)
        assert "s3://some-bucket/p/run/uid" in msg and "EndpointConnectionError" in msg and dead in msg
        assert SECRET not in msg and KEY_ID not in msg
        assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "s3://some-bucket/p/run/uid/trials/m.t.1/result.json" in str(pytest.raises(StoreError, ops[0]).value)


def test_an_endpoint_with_credentials_in_it_is_never_echoed() -> None:
    """`mcpfleet report/export --endpoint-url` take any URL; one with a password (or a signed query) in it is
    shown as shown_url prints it, in the store's own words and in botocore's it repeats."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://minio:pw-{SECRET[:8]}@127.0.0.1:{port}/?X-Amz-Signature=sig{KEY_ID}"
    st = S3Store("some-bucket", "p", "run", endpoint_url=url, tuning=FAST)
    with pytest.raises(StoreError) as info:
        st.read_result("m.t.1")
    shown = str(info.value) + repr(st)
    assert f"http://***@127.0.0.1:{port}" in shown and "could not read" in shown
    assert SECRET[:8] not in shown and "minio" not in shown and KEY_ID not in shown and "sig" not in shown


def test_missing_bucket_is_a_store_error_without_retries(s3_endpoint: str) -> None:  # noqa: F811
    st = S3Store("no-such-bucket-here", "p", "run", endpoint_url=s3_endpoint, tuning=FAST)
    with pytest.raises(StoreError, match=r"s3://no-such-bucket-here/p/run/trials/m\.t\.1/result\.json.*NoSuchBucket"):
        st.commit("m.t.1", b"{}")


async def test_run_trial_propagates_a_failed_commit(
    s3_endpoint: str,
    s3: Any,
    bucket: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """run_trial does not swallow store errors in its record phase: no record, an exception instead."""
    pack = make_tiny_pack(tmp_path / "pack")
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {
            "models": [{"name": "m", "model": "scripted/oracle"}],
            "agent": "oracle",
            "tasks": {"path": str(pack)},
        },
    }
    [spec] = plan(parse_evalrun(doc), pack)
    with FaultProxy(s3_endpoint, lambda m, p: "drop" if m == "PUT" and p.endswith("/result.json") else None) as px:
        st = S3Store(bucket, "p", "t", endpoint_url=px.url, tuning=FAST)
        with pytest.raises(StoreError, match="could not write .*/result.json"):
            await run_trial(spec, st, TrialContext())
    written = [k.rsplit("/", 1)[1] for k in keys(s3, bucket, f"p/t/trials/{spec.trial_id}/")]
    assert "messages.json" in written and "meta.json" in written and "result.json" not in written


# --------------------------------------------------------------------------------- end to end


def write_run(
    tmp_path: Path, name: str, uri: str, endpoint: str, tasks: int = 2, retries: dict[str, Any] | None = None
) -> Path:
    pack = tmp_path / "pack"
    if not pack.exists():
        make_tiny_pack(pack, tasks=tasks)
    doc = {
        "apiVersion": "mcpfleet.io/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": name},
        "spec": {
            "models": [{"name": "oracle", "model": "scripted/oracle"}],
            "tasks": {"path": str(pack)},
            "concurrency": {"total": 2},
            "retries": retries or {"limit": 0, "backoffSeconds": 0},
            "output": {"uri": uri, "endpointUrl": endpoint},
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def result_heads(s3: Any, bucket: str, root: str) -> dict[str, tuple[str, Any]]:
    out = {}
    for k in keys(s3, bucket, f"{root}/trials/"):
        if k.endswith("/result.json"):
            h = s3.head_object(Bucket=bucket, Key=k)
            out[k.split("/")[-2]] = (h["ETag"], h["LastModified"])
    return out


def test_local_run_records_to_s3_and_resumes(s3_endpoint: str, s3: Any, bucket: str, tmp_path: Path) -> None:  # noqa: F811
    path = write_run(tmp_path, "s3run", f"s3://{bucket}/team/evals", s3_endpoint)
    summary, where = execute(load_evalrun(path), tmp_path, show_progress=False)
    root = "team/evals/s3run"
    assert where == f"s3://{bucket}/{root}"
    assert summary["complete"] and summary["trials_recorded"] == 2
    assert [r["pass_at_1"] for r in summary["rows"]] == [1.0]
    stored = json.loads(s3.get_object(Bucket=bucket, Key=f"{root}/summary.json")["Body"].read())
    assert stored["rows"] == summary["rows"]
    assert json.loads(s3.get_object(Bucket=bucket, Key=f"{root}/run.json")["Body"].read())["run"] == "s3run"
    heads = result_heads(s3, bucket, root)
    assert sorted(heads) == [
        "oracle.filesystem.standard.tiny.move_todo_0.1",
        "oracle.filesystem.standard.tiny.move_todo_1.1",
    ]
    for trial in heads:
        rec = json.loads(s3.get_object(Bucket=bucket, Key=f"{root}/trials/{trial}/result.json")["Body"].read())
        assert rec["passed"] is True and rec["trial_id"] == trial
        assert {f"{root}/trials/{trial}/messages.json", f"{root}/trials/{trial}/meta.json"} <= set(keys(s3, bucket))

    # A rerun resumes: nothing is run again, result.json objects are untouched.
    summary2, _ = execute(load_evalrun(path), tmp_path, show_progress=False)
    assert summary2["complete"] and summary2["rows"] == summary["rows"]
    assert result_heads(s3, bucket, root) == heads


def test_a_failed_commit_is_never_counted_as_passed(
    s3_endpoint: str,
    s3: Any,
    bucket: str,
    tmp_path: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The endpoint goes away exactly when result.json is written: the trial is never counted as passed. Its
    store failed after the store's own retries, so no trial is paid for again in this run: the launches stop and
    the summary names every trial without a record (`mcpfleet run` exits 4). Back, a resumed run runs them."""
    monkeypatch.setattr(store_mod, "S3_DEFAULTS", FAST)  # reaches the workers through StoreConfig
    per_commit = FAST.max_attempts * FAST.op_attempts
    dropped: dict[str, int] = {"move_todo_0": 0, "move_todo_1": 0}

    def down_at_commit(method: str, path: str) -> str | None:
        for task in dropped:
            if method == "PUT" and path.split("?")[0].endswith(f".{task}.1/result.json"):
                dropped[task] += 1
                return "drop"
        return None

    with FaultProxy(s3_endpoint, down_at_commit) as proxy:
        path = write_run(tmp_path, "flaky", f"s3://{bucket}/e", proxy.url, retries={"limit": 1, "backoffSeconds": 0})
        summary, _ = execute(load_evalrun(path), tmp_path, show_progress=False)

    # Each trial's commit was tried once (with the store's own retries), none run again (retries.limit is 1).
    assert all(n in (0, per_commit) for n in dropped.values()) and sum(dropped.values()) >= per_commit, dropped
    assert result_heads(s3, bucket, "e/flaky") == {}
    assert summary["trials_recorded"] == 0 and not summary["complete"]
    ids = [f"oracle.filesystem.standard.tiny.{task}.1" for task in dropped]
    assert sorted(summary["unrecorded"]) == ids
    assert all(why.startswith(("not stored: ", "not run: ")) for why in summary["unrecorded"].values())
    # A trial's files were written before its commit failed; a resumed run discards them first.
    assert any("/messages.json" in k for k in keys(s3, bucket, "e/flaky/trials/"))

    # The endpoint is back (same run, no proxy): the unrecorded trials run, each passes once.
    path = write_run(tmp_path, "flaky", f"s3://{bucket}/e", s3_endpoint, retries={"limit": 1, "backoffSeconds": 0})
    summary, _ = execute(load_evalrun(path), tmp_path, show_progress=False)
    assert summary["complete"] and summary["rows"][0]["pass_at_1"] == 1.0
    assert sorted(result_heads(s3, bucket, "e/flaky")) == ids


# ------------------------------------------------------------------------------------------- the run lease


def lease_store(endpoint: str, bucket: str) -> S3Store:
    return S3Store(bucket, "team/evals", "leased", endpoint_url=endpoint, tuning=FAST)


def test_a_second_run_on_an_s3_root_is_refused_while_the_first_holds_it(
    s3_endpoint: str,  # noqa: F811
    s3: Any,
    bucket: str,
    tmp_path: Path,
) -> None:
    """Before, an s3:// run had no lock: a second `mcpfleet run` of the same root deleted the first one's
    in-flight trial files as leftovers and ran its unfinished trials again beside it."""
    from mcpfleet.runner.launch.launcher import RunRefused
    from mcpfleet.runner.launch.s3lease import LEASE_NAME, LeaseHeld, S3Lease

    root = "team/evals/leased"
    in_flight = f"{root}/trials/oracle.filesystem.standard.tiny.move_todo_0.1/messages.json"
    with S3Lease(lease_store(s3_endpoint, bucket), owner="host-a pid 1"):
        s3.put_object(Bucket=bucket, Key=in_flight, Body=b"[]")  # the first run's trial, not yet committed
        with pytest.raises(LeaseHeld, match="host-a pid 1"):
            S3Lease(lease_store(s3_endpoint, bucket), owner="host-b pid 2").acquire()
        path = write_run(tmp_path, "leased", f"s3://{bucket}/team/evals", s3_endpoint)
        with pytest.raises(RunRefused, match=r"another `mcpfleet run` \(host-a pid 1\) is running this run"):
            execute(load_evalrun(path), tmp_path, show_progress=False)
        assert in_flight in keys(s3, bucket)  # nothing of the first run was touched
        assert not [k for k in keys(s3, bucket) if k.endswith("result.json")]
    assert f"{root}/{LEASE_NAME}" not in keys(s3, bucket)  # released at exit
    summary, _ = execute(load_evalrun(path), tmp_path, show_progress=False)  # now it runs, and releases too
    assert summary["complete"] and f"{root}/{LEASE_NAME}" not in keys(s3, bucket)


def test_a_dead_runs_lease_is_taken_over_after_its_ttl_and_a_renewed_one_is_not(
    s3_endpoint: str,  # noqa: F811
    s3: Any,
    bucket: str,
) -> None:
    from mcpfleet.runner.launch.s3lease import LEASE_NAME, LeaseHeld, S3Lease

    dead = S3Lease(lease_store(s3_endpoint, bucket), ttl_s=2, owner="dead")
    dead.acquire()  # and never renewed, as by a SIGKILLed run
    with pytest.raises(LeaseHeld, match="dead"):
        S3Lease(lease_store(s3_endpoint, bucket), ttl_s=2, owner="next").acquire()
    time.sleep(3.5)
    with S3Lease(lease_store(s3_endpoint, bucket), ttl_s=2, owner="next") as taker:
        assert not dead.renew()  # the dead run's lease is gone: were it alive, it would learn so
        dead.release()  # and its release leaves the new holder's lease alone
        assert f"team/evals/leased/{LEASE_NAME}" in keys(s3, bucket)
        time.sleep(3.5)  # renewed every ttl/4, so still live after its ttl
        with pytest.raises(LeaseHeld, match="next"):
            S3Lease(lease_store(s3_endpoint, bucket), ttl_s=2, owner="third").acquire()
        assert not taker.lost
