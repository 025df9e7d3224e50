"""Small PostgreSQL task packs for the tests: one in mcpfleet's layout (a state generator) and one in MCPMark's
(verify.py reading POSTGRES_* and argv[1], a flat statesPath with .sql/.backup dumps, prepare_environment.py)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mcpfleet.runner.services import pgcluster, run_resources

ROWS = 2000
SEED = 7

GENERATOR = f"""
import random, sys
rng = random.Random({SEED})
with open(sys.argv[1], "w") as f:
    f.write("CREATE TABLE orders (id int PRIMARY KEY, customer text, qty int NOT NULL, "
            "price numeric(8,2) NOT NULL);\\n")
    f.write("COPY orders (id, customer, qty, price) FROM stdin;\\n")
    for i in range(1, {ROWS} + 1):
        customer = rng.choice(["ana", "bo", "cy", "\\\\N"])
        f.write(f"{{i}}\\t{{customer}}\\t{{rng.randint(1, 9)}}\\t{{rng.randint(100, 9999) / 100}}\\n")
    f.write("\\\\.\\n")
    f.write("CREATE INDEX orders_customer ON orders (customer);\\n")
"""

CONNECT = """
import json, os, sys
import psycopg2
assert sys.argv[1] == os.environ["POSTGRES_DATABASE"], "argv[1] must name the trial's database"
conn = psycopg2.connect(host=os.environ["POSTGRES_HOST"], port=os.environ["POSTGRES_PORT"],
                        user=os.environ["POSTGRES_USERNAME"], password=os.environ["POSTGRES_PASSWORD"],
                        dbname=os.environ["POSTGRES_DATABASE"])
cur = conn.cursor()
def fail(msg):
    print(msg)
    sys.exit(1)
"""

ADD_TOTAL_VERIFY = (
    CONNECT
    + f"""
cur.execute("SELECT data_type FROM information_schema.columns WHERE table_name='orders' AND column_name='total'")
row = cur.fetchone()
if not row or row[0] != "numeric":
    fail("orders.total numeric is missing")
cur.execute("SELECT count(*), count(*) FILTER (WHERE total IS DISTINCT FROM qty * price) FROM orders")
n, bad = cur.fetchone()
if n != {ROWS} or bad:
    fail(f"{{n}} rows, {{bad}} wrong totals")
print("ok")
"""
)

COUNT_VERIFY = (
    CONNECT
    + """
items = json.load(open(os.environ["MCP_MESSAGES"]))
answers = [c["text"] for m in items if m.get("type") == "message" and m.get("role") == "assistant"
           and m.get("status") == "completed" for c in m["content"] if c.get("type") == "output_text"]
cur.execute("SELECT count(*) FROM orders WHERE qty >= 8")
expected = str(cur.fetchone()[0])
if not answers or answers[-1].strip() != expected:
    fail(f"answer {answers[-1:]!r}, expected {expected}")
print("ok")
"""
)

AUDITOR_VERIFY = (
    CONNECT
    + """
cur.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'auditor'")
if cur.fetchone() != (True,):
    fail("no login role auditor")
cur.execute("SELECT has_table_privilege('auditor', 'orders', 'SELECT'), "
            "has_table_privilege('auditor', 'orders', 'UPDATE')")
if cur.fetchone() != (True, False):
    fail("auditor must read orders and nothing more")
print("ok")
"""
)


def big_orders() -> int:
    """What the answer task's oracle answers: the generator's rows with qty >= 8."""
    rng = random.Random(SEED)
    n = 0
    for _ in range(ROWS):
        rng.choice(["ana", "bo", "cy", "\\N"])
        n += rng.randint(1, 9) >= 8
        rng.randint(100, 9999)
    return n


def _meta(name: str, category: str, **extra: object) -> str:
    meta = {
        "task_id": name,
        "task_name": name.replace("_", " ").title(),
        "category_id": category,
        "category_name": category.title(),
        "description": f"{name} on {category}.",
        "author": "tests",
        "created_at": "2026-11-23",
        "difficulty": "L1",
        "tags": [],
        "mcp": ["postgres"],
        "meta_data": {"stateType": "database", "stateContent": category, "stateUrl": ""},
        **extra,
    }
    return json.dumps(meta)


def write_task(
    root: Path, category: str, name: str, description: str, verify: str, oracle: dict | None, **meta: object
) -> Path:
    d = root / "postgres" / "standard" / category / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "description.md").write_text(description)
    (d / "verify.py").write_text(verify)
    (d / "meta.json").write_text(_meta(name, category, **meta))
    if oracle is not None:
        (d / "oracle.json").write_text(json.dumps(oracle))
    return d


def sql(text: str) -> dict:
    return {"tool": "execute_sql", "arguments": {"sql": text}}


def make_pg_pack(root: Path) -> Path:
    """mcpfleet's layout: a generated `shop` state and three tasks (a change, an answer, a role audit)."""
    states = root / "postgres" / "states"
    states.mkdir(parents=True, exist_ok=True)
    (states / "shop.py").write_text(GENERATOR)
    explore = {"tool": "list_objects", "arguments": {"schema_name": "public", "object_type": "table"}}
    write_task(
        root,
        "shop",
        "add_total",
        "Add a column total numeric(10,2) to orders holding qty * price for every row.\n",
        ADD_TOTAL_VERIFY,
        {
            "steps": [
                explore,
                sql("ALTER TABLE orders ADD COLUMN total numeric(10,2); UPDATE orders SET total = qty * price"),
            ]
        },
    )
    write_task(
        root,
        "shop",
        "count_big",
        "How many orders have a quantity of at least 8? Answer with the number only.\n",
        COUNT_VERIFY,
        {"steps": [sql("SELECT count(*) FROM orders WHERE qty >= 8")], "answer": str(big_orders())},
    )
    write_task(
        root,
        "shop",
        "audit_role",
        "Create a login role auditor that can read orders and nothing else.\n",
        AUDITOR_VERIFY,
        {"steps": [sql("CREATE ROLE auditor LOGIN; GRANT SELECT ON orders TO auditor")]},
        mcpfleet={"isolation": "cluster"},
    )
    return root


INVENTORY_SQL = """
CREATE TABLE items (sku text PRIMARY KEY, stock int NOT NULL);
INSERT INTO items SELECT 'sku' || g, g % 7 FROM generate_series(1, 300) g;
"""

RESTOCK_VERIFY = (
    CONNECT
    + """
cur.execute("SELECT count(*) FROM items WHERE stock < 3")
if cur.fetchone()[0]:
    fail("items below 3 remain")
cur.execute("SELECT count(*) FROM items")
if cur.fetchone()[0] != 300:
    fail("items were lost")
print("ok")
"""
)

PREPARE = """
import os
import psycopg2
conn = psycopg2.connect(host=os.environ["POSTGRES_HOST"], port=os.environ["POSTGRES_PORT"],
                        user=os.environ["POSTGRES_USERNAME"], password=os.environ["POSTGRES_PASSWORD"],
                        dbname=os.environ["POSTGRES_DATABASE"])
conn.autocommit = True
cur = conn.cursor()
for role in ("analyst", "intern"):
    cur.execute(f"DROP ROLE IF EXISTS {role}")
    cur.execute(f"CREATE ROLE {role} LOGIN")
cur.execute("CREATE TABLE salaries (name text, amount int)")
cur.execute("INSERT INTO salaries VALUES ('a', 1), ('b', 2)")
"""

GRANT_VERIFY = (
    CONNECT
    + """
cur.execute("SELECT has_table_privilege('analyst', 'salaries', 'SELECT'), "
            "has_table_privilege('intern', 'salaries', 'SELECT')")
if cur.fetchone() != (True, False):
    fail("analyst must read salaries, intern must not")
print("ok")
"""
)


def make_mcpmark_pack(root: Path, states: Path) -> tuple[Path, Path]:
    """MCPMark's format: tasks whose verify.py reads POSTGRES_* and argv[1]; states as a flat folder of dumps
    (``postgres_state/<category>.sql``); a stateless category whose prepare_environment.py makes roles."""
    states.mkdir(parents=True, exist_ok=True)
    (states / "inventory.sql").write_text(INVENTORY_SQL)
    write_task(
        root,
        "inventory",
        "restock",
        "Raise the stock of every item below 3 to exactly 3.\n",
        RESTOCK_VERIFY,
        {"steps": [sql("UPDATE items SET stock = 3 WHERE stock < 3")]},
    )
    d = write_task(
        root,
        "security",
        "grant_reader",
        "Let the analyst role read salaries; the intern must not.\n",
        GRANT_VERIFY,
        {"steps": [sql("GRANT SELECT ON salaries TO analyst")]},
    )
    (d / "prepare_environment.py").write_text(PREPARE)
    return root, states


def mcpfleet_run_in(spec: Path, pg_dir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`mcpfleet run SPEC --no-progress` from `/`, its output captured, with its PostgreSQL clusters under
    ``pg_dir`` (a scratch folder the trial users can reach, not the test's tmp_path)."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("mcpfleet")), "run", str(spec), "--no-progress"],
        capture_output=True,
        text=True,
        env={**os.environ, pgcluster.PG_DIR_ENV: str(pg_dir)},
        cwd="/",
        timeout=timeout,
    )


@contextlib.contextmanager
def scratch_runs_root(prefix: str) -> Iterator[Path]:
    """A PostgreSQL runs root of a test's own, where the real one is (RAM), 0711 like it (the servers' OS users
    must reach their folders: no 0700 pytest folder above); its servers killed and its files removed after.

    A test session killed before its cleanup (a timeout, Ctrl-C twice) leaves such a root behind, in RAM: the
    next one sweeps the roots of its prefix whose runs are gone, as a run sweeps its own runs root."""
    for old in pgcluster._scratch().glob(f"{prefix}*"):
        sweep_scratch_root(old)
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=pgcluster._scratch()))
    d.chmod(0o711)
    try:
        yield d
    finally:
        pgcluster.kill_postmasters(d)
        subprocess.run(["rm", "-rf", str(d)], check=False)


def sweep_scratch_root(root: Path, min_age_s: float = 600.0) -> None:
    """Remove a test's runs root once no run in it is alive: its dead runs swept (``pgcluster.sweep_stale``),
    then the folder itself if it is empty and older than ``min_age_s`` (a concurrent session's fresh root is
    empty until its run starts)."""
    try:
        age = time.time() - root.stat().st_mtime  # before the sweep, which touches it
    except OSError:
        return
    pgcluster.sweep_stale(root)
    with contextlib.suppress(OSError):
        if age > min_age_s:
            root.rmdir()  # fails, as it should, while anything is left in it


@contextlib.contextmanager
def run_cluster_in(pg_dir: Path, services: list[str], prefork: bool = False) -> Iterator[pgcluster.ClusterHandle]:
    """The run's cluster (``run_resources``, as a run starts it: with the postgres-mcp zygote when ``prefork``,
    as `mcpfleet run` does) under ``pg_dir``."""
    os.environ[pgcluster.PG_DIR_ENV] = str(pg_dir)
    try:
        with run_resources(services, prefork=prefork) as res:
            assert set(res) == {"postgres"}  # no other service needs a run-scoped resource
            yield res["postgres"]
    finally:
        os.environ.pop(pgcluster.PG_DIR_ENV, None)
