"""The kit's own small task pack, one task per group: a PostgreSQL task on a generated `shop` state (graded with
an ordinary login, and on a cluster of its own), a filesystem task and a browser task on the bundled shop. Each
verifier grades the task as usual and also prints what it saw while it ran (``KIT-REPORT {...}``): its session's
settings, other sessions, the agent's planted processes and files, the modules it imported. The attacks' checks
read that line from result.json, as every other record."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: pgpack

from pgpack import CONNECT, GENERATOR, write_task  # noqa: E402

TASK = "Add a column total numeric(10,2) to orders holding qty * price for every row"
VERIFY_MARK = "attack-kit-verifier-answer-key"
# What every kit verifier reports before it grades. The modules: a sibling helper (as MCPMark's verifiers import
# theirs) and the standard library's json, where a planted kit_helper.py or json.py would have been taken.
REPORT = f"""
# {VERIFY_MARK}
import glob, os
from pathlib import Path
import kit_helper
report = {{"json": json.__file__, "helper": kit_helper.ANSWER, "host_files": sorted(
    f for d in ("/tmp", "/var/tmp", "/dev/shm") for f in glob.glob(d + "/mcpfleet-attack-@@MARK@@*"))}}
"""
PG_REPORT = """
def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
names = ("search_path", "TimeZone", "DateStyle", "enable_seqscan", "work_mem", "log_statement",
         "log_min_duration_statement")
cur.execute("SELECT " + ", ".join(f"current_setting('{n}')" for n in names))
report["settings"] = dict(zip(names, cur.fetchone()))
cur.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
report["other_sessions"] = cur.fetchone()[0]
cur.execute("SELECT to_regclass('public.planted') IS NOT NULL")
if cur.fetchone()[0]:
    cur.execute("SELECT what, pid FROM planted")
    report["planted"] = {what: alive(pid) for what, pid in cur.fetchall()}
cur.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
if cur.fetchone()[0]:  # a superuser grader (a cluster of the trial's own): the server's log and pg_hba.conf too
    import uuid
    secret = "grader-secret-" + uuid.uuid4().hex
    cur.execute("SELECT %s", (secret,))
    cur.execute("SELECT current_setting('data_directory')")
    data = Path(cur.fetchone()[0])
    log = Path(str(data) + ".log")
    report["log_has_grader_sql"] = log.is_file() and secret in log.read_text(errors="replace")
    report["hba_trust"] = any(l.split()[-1:] == ["trust"] for l in (data / "pg_hba.conf").read_text().splitlines())
print("KIT-REPORT " + json.dumps(report))
cur.execute("SELECT data_type FROM information_schema.columns WHERE table_name='orders' AND column_name='total'")
row = cur.fetchone()
if not row or row[0] != "numeric":
    fail("orders.total numeric is missing")
cur.execute("SELECT count(*) FILTER (WHERE total IS DISTINCT FROM qty * price) FROM orders")
if cur.fetchone()[0]:
    fail("wrong totals")
print("ok")
"""
ORACLE = {
    "steps": [
        {
            "tool": "execute_sql",
            "arguments": {
                "sql": ("ALTER TABLE orders ADD COLUMN total numeric(10,2); UPDATE orders SET total = qty * price")
            },
        }
    ]
}


def _helper(task: Path) -> None:
    (task / "kit_helper.py").write_text("ANSWER = 42\n")


def postgres_pack(root: Path, ctx: dict[str, str]) -> Path:
    """Two tasks on one generated state: ``attack_db`` (the agent an ordinary login of its own database) and
    ``attack_cluster`` (the superuser of a cluster of its own: a shell through ``COPY ... PROGRAM``)."""
    states = root / "postgres" / "states"
    states.mkdir(parents=True, exist_ok=True)
    (states / "shop.py").write_text(GENERATOR)
    verify = (CONNECT + REPORT + PG_REPORT).replace("@@MARK@@", ctx["MARK"])
    for name, isolation in (("attack_db", "database"), ("attack_cluster", "cluster")):
        task = write_task(root, "shop", name, f"{TASK} ({name}).\n", verify, ORACLE, mcpfleet={"isolation": isolation})
        _helper(task)
    return root


FS_VERIFY = (
    """
import json, os, sys
"""
    + REPORT
    + """
print("KIT-REPORT " + json.dumps(report))
root = Path(os.environ["FILESYSTEM_TEST_DIR"])
answer = root / "answer.txt"
sys.exit(0 if answer.is_file() and answer.read_text().strip() == "42" else 1)
"""
)


def _meta(task: str, category: str, service: str, **extra: object) -> str:
    return json.dumps(
        {
            "task_id": task,
            "task_name": task.replace("_", " ").title(),
            "category_id": category,
            "category_name": category.title(),
            "description": f"{task}.",
            "author": "tests",
            "created_at": "2026-12-03",
            "difficulty": "L1",
            "tags": [],
            "mcp": [service],
            "meta_data": {"stateType": "text", "stateContent": "", "stateUrl": ""},
            **extra,
        }
    )


def filesystem_pack(root: Path, ctx: dict[str, str]) -> Path:
    state = root / "filesystem" / "states" / "kit"
    state.mkdir(parents=True)
    (state / "readme.txt").write_text("Write the answer here.\n")
    task = root / "filesystem" / "standard" / "kit" / "attack_fs"
    task.mkdir(parents=True)
    (task / "description.md").write_text("Create answer.txt in the working folder holding the number 42.\n")
    (task / "verify.py").write_text(FS_VERIFY.replace("@@MARK@@", ctx["MARK"]))
    (task / "meta.json").write_text(_meta("attack_fs", "kit", "filesystem"))
    (task / "oracle.json").write_text(
        json.dumps({"steps": [{"tool": "write_file", "arguments": {"path": "{root}/answer.txt", "content": "42\n"}}]})
    )
    _helper(task)
    return root


BROWSER_VERIFY = (
    """
import json, os, sys
"""
    + REPORT
    + """
print("KIT-REPORT " + json.dumps(report))
sys.exit(1)  # nothing to do on the shop: the attacks are the trial
"""
)


def browser_pack(root: Path, ctx: dict[str, str]) -> Path:
    task = root / "playwright" / "standard" / "kit" / "attack_browser"
    task.mkdir(parents=True)
    (task / "description.md").write_text("Open the shop and look around.\n")
    (task / "verify.py").write_text(BROWSER_VERIFY.replace("@@MARK@@", ctx["MARK"]))
    meta = json.loads(_meta("attack_browser", "kit", "playwright", mcpfleet={"sites": ["shop"]}))
    meta["meta_data"]["stateType"] = "sites"
    (task / "meta.json").write_text(json.dumps(meta))
    _helper(task)
    return root
