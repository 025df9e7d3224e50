"""The bundled sites (mcpfleet.sites): each one started as a real subprocess on a free loopback port, driven
over HTTP like a browser without JavaScript would (forms, cookies, CSRF tokens), and checked where verifiers
check, in the SQLite file: the data and the append-only audit log. Also: deterministic seeds, a CSRF sweep over
every POST route, start-up cost, and that no site process outlives its test or its parent.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from mcpfleet.sites import SITES, build, seed
from mcpfleet.sites.common.db import content_hash
from mcpfleet.sites.common.web import Site, create_app
from mcpfleet.sites.store import logic

SITES_DIR = Path(__file__).resolve().parents[1] / "sites"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
ERRORS = re.compile(r'class="error" id="[^"]+">([^<]+)</p>')
FLASH = re.compile(r'class="flash flash-\w+" role="\w+">([^<]+)</div>')
START_CPU_LIMIT = 1.0  # seconds of CPU until the site answers /healthz (wall time on an idle machine is ~this)


@dataclass
class Running:
    url: str
    proc: subprocess.Popen[str]
    wall: float  # spawn -> first /healthz 200
    cpu: float  # the process's user+system CPU seconds at that moment


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seed cache for the module: each data kind is generated once, then copied per test."""
    return tmp_path_factory.mktemp("sites-cache")


@pytest.fixture(autouse=True)
def _private_sites_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed templates and compiled templates go to the module's folder, never the user's ~/.cache."""
    monkeypatch.setenv("MCPFLEET_SITES_CACHE", str(cache))


@pytest.fixture
def env(cache: Path) -> dict[str, str]:
    return {**os.environ, "MCPFLEET_SITES_CACHE": str(cache)}


@contextmanager
def running(name: str, data: Path, env: dict[str, str], cwd: Path) -> Iterator[Running]:
    """The site as a subprocess (``--port 0``: it binds a free port and prints it); stopped with SIGTERM after."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", f"mcpfleet.sites.{name}", "--data", str(data), "--port", "0", "--exit-with-parent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,  # never the repo root: `-m` puts the cwd on sys.path and the repo's operator/ would shadow stdlib
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.fullmatch(rf"{name} serving (http://127\.0\.0\.1:\d+)\n", line)
        assert match, f"unexpected first line {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        url = match.group(1)
        assert httpx.get(f"{url}/healthz").text == "ok"
        wall = time.perf_counter() - start
        yield Running(url=url, proc=proc, wall=wall, cpu=_cpu_seconds(proc.pid))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{name} did not stop within 5 s of SIGTERM") from None
        finally:
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
    assert not _alive(proc.pid)


class Browser:
    """A cookie-keeping HTTP client that fills in each form's CSRF token the way a browser submits it."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, follow_redirects=True, timeout=20)

    def get(self, path: str) -> httpx.Response:
        return self.client.get(path)

    def submit(self, form_page: str, action: str, data: dict[str, str] | list[tuple[str, str]]) -> httpx.Response:
        """Open ``form_page``, take its CSRF token, post ``data`` to ``action``."""
        page = self.client.get(form_page)
        match = CSRF.search(page.text)
        assert match, f"no CSRF token on {form_page}"
        items = list(data.items()) if isinstance(data, dict) else list(data)
        return self.client.post(
            action,
            data=None,
            content=_encode([("csrf_token", match.group(1)), *items]),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    def close(self) -> None:
        self.client.close()


def _encode(items: list[tuple[str, str]]) -> str:
    from urllib.parse import urlencode

    return urlencode(items)


def _audit(db: Path, action: str | None = None) -> list[sqlite3.Row]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        if action is None:
            return conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall()
        return conn.execute("SELECT * FROM audit_log WHERE action = ? ORDER BY id", (action,)).fetchall()
    finally:
        conn.close()


def _query(db: Path, sql: str, *params: object) -> list[sqlite3.Row]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _credentials(site: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SITES_DIR / site / "credentials.json").read_text())
    return data


# -- seeding ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["shop", "forum"])
def test_seed_is_deterministic_and_copies_are_fresh(name: str, tmp_path: Path, cache: Path) -> None:
    first = build(name, tmp_path / "a.db")
    second = build(name, tmp_path / "b.db")
    other = build(name, tmp_path / "c.db", seed=7)
    assert content_hash(first) == content_hash(second)
    assert content_hash(first) != content_hash(other)
    copy = seed(name, tmp_path / "trial", cache=cache)
    assert copy == tmp_path / "trial" / SITES[name].db_file
    assert content_hash(copy) == content_hash(first)
    # a trial's changes stay in its copy: the next copy starts from the seed again
    conn = sqlite3.connect(copy)
    conn.execute("UPDATE site_meta SET value = 'changed' WHERE key = 'clock'")
    conn.commit()
    conn.close()
    assert content_hash(seed(name, tmp_path / "trial2", cache=cache)) == content_hash(first)
    # the audit log is append-only
    conn = sqlite3.connect(copy)
    conn.execute("INSERT INTO audit_log (site, actor, action, site_time, created_at) VALUES ('x', 'y', 'z', 't', 't')")
    for statement in ("UPDATE audit_log SET action = 'w'", "DELETE FROM audit_log"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(statement)
    conn.close()


def test_seeded_data_sizes_and_mess(tmp_path: Path, cache: Path) -> None:
    store = seed("shop", tmp_path / "store", cache=cache)
    forum = seed("forum", tmp_path / "forum", cache=cache)

    def count(db: Path, sql: str) -> int:
        return int(_query(db, sql)[0][0])

    assert count(store, "SELECT COUNT(*) FROM products") >= 400
    assert count(store, "SELECT COUNT(*) FROM products WHERE stock = 0") >= 10
    assert count(store, "SELECT COUNT(*) FROM products WHERE status = 'disabled'") >= 5
    assert count(store, "SELECT COUNT(*) FROM customers") >= 300
    assert count(store, "SELECT COUNT(*) FROM orders") >= 800
    assert count(store, "SELECT COUNT(DISTINCT status) FROM orders") == len(logic.STATUSES)
    assert count(store, "SELECT COUNT(*) FROM reviews") >= 1000
    assert count(forum, "SELECT COUNT(*) FROM users") >= 100
    assert count(forum, "SELECT COUNT(*) FROM forums") >= 20
    assert count(forum, "SELECT COUNT(*) FROM posts") >= 600
    assert count(forum, "SELECT COUNT(*) FROM comments") >= 2000
    assert count(forum, "SELECT COUNT(*) FROM reports WHERE status = 'open'") >= 10
    assert count(forum, "SELECT COUNT(*) FROM posts WHERE edited_at IS NOT NULL") >= 10
    # cached scores agree with the votes, and order totals with the store's arithmetic
    assert (
        count(
            forum,
            "SELECT COUNT(*) FROM posts p WHERE score != (SELECT COALESCE(SUM(value), 0) FROM post_votes"
            " WHERE post_id = p.id)",
        )
        == 0
    )
    settings = dict(logic.DEFAULT_SETTINGS)
    for order in _query(store, "SELECT * FROM orders ORDER BY id LIMIT 200"):
        coupon = _query(store, "SELECT * FROM coupons WHERE code = ?", order["coupon_code"])
        totals = logic.compute_totals(
            order["subtotal_cents"], order["shipping_method"], coupon[0] if coupon else None, settings
        )
        assert (totals.discount, totals.shipping, totals.tax, totals.total) == (
            order["discount_cents"],
            order["shipping_cents"],
            order["tax_cents"],
            order["total_cents"],
        )


# -- the shop -----------------------------------------------------------------------------------------------
def test_shop_login_search_checkout_and_audit(tmp_path: Path, cache: Path, env: dict[str, str]) -> None:
    db = seed("shop", tmp_path / "data", cache=cache)
    emma = next(a for a in _credentials("shop")["accounts"] if a["email"] == "emma.lopez@example.com")
    with running("shop", tmp_path / "data", env, tmp_path) as site:
        assert site.cpu < START_CPU_LIMIT, f"shop used {site.cpu:.2f} s CPU to start"
        b = Browser(site.url)
        # wrong password: a validation message, a failed sign-in in the log, still anonymous
        r = b.submit("/login", "/login", {"email": emma["email"], "password": "nope"})
        assert r.status_code == 422 and "Incorrect email or password." in ERRORS.findall(r.text)
        r = b.submit("/login", "/login", {"email": emma["email"], "password": emma["password"]})
        assert r.status_code == 200 and r.url.path == "/account" and "Welcome back, Emma!" in FLASH.findall(r.text)

        # search with pagination: page 2 continues page 1
        first = b.get("/search?q=water&sort=price_asc")
        total = int(re.search(r"Showing 1–24 of (\d+) products", first.text).group(1))  # type: ignore[union-attr]
        assert total > 24
        second = b.get("/search?q=water&sort=price_asc&page=2")
        assert f"Showing 25–{min(48, total)} of {total} products" in second.text
        names = re.findall(r'<h3 id="p-\d+"><a href="/product/([^"]+)"', first.text + second.text)
        assert len(names) == len(set(names)) == min(48, total)

        # a POST without the form's token is refused and changes nothing
        before = len(_audit(db))
        r = b.client.post("/cart/add", data={"product_id": "1"})
        assert r.status_code == 403 and "Form expired" in r.text
        assert len(_audit(db)) == before

        # add to cart, then a checkout that fails validation, then one that places the order
        product = _query(db, "SELECT * FROM products WHERE status = 'active' AND stock >= 10 ORDER BY id LIMIT 1")[0]
        r = b.submit(
            f"/product/{product['slug']}",
            "/cart/add",
            {"product_id": str(product["id"]), "quantity": "3", "next": "/cart"},
        )
        assert r.url.path == "/cart" and product["name"] in r.text
        cart = _query(db, "SELECT product_id, quantity FROM cart_items WHERE customer_id = 1 ORDER BY added_at")
        address = _query(db, "SELECT id FROM addresses WHERE customer_id = 1 AND is_default = 1")[0]["id"]
        r = b.submit(
            "/checkout/shipping", "/checkout/shipping", {"address_id": str(address), "shipping_method": "expedited"}
        )
        assert r.url.path == "/checkout/payment"
        r = b.submit("/checkout/payment", "/checkout/coupon", {"coupon_code": "SPRING25"})
        assert r.status_code == 422 and "That coupon code expired on 2025-05-31." in ERRORS.findall(r.text)
        r = b.submit(
            "/checkout/payment",
            "/checkout/payment",
            {
                "payment_method": "card",
                "card_name": "Emma Lopez",
                "card_number": "4242 4242 4242 4241",
                "card_expiry": "13/27",
                "card_cvc": "12",
            },
        )
        assert r.status_code == 422
        assert set(ERRORS.findall(r.text)) >= {
            "Enter a valid card number.",
            "Enter the expiry date as MM/YY.",
            "Enter the 3- or 4-digit security code.",
        }
        assert not _query(db, "SELECT 1 FROM orders WHERE customer_id = 1 AND created_at >= '2025-06-14T09:00'")
        r = b.submit(
            "/checkout/payment",
            "/checkout/payment",
            {
                "payment_method": "card",
                "card_name": "Emma Lopez",
                "card_number": "4242 4242 4242 4242",
                "card_expiry": "08/27",
                "card_cvc": "123",
            },
        )
        number = r.url.path.rsplit("/", 1)[1]
        assert r.status_code == 200 and f"Thank you! Your order #{number} has been placed." in FLASH.findall(r.text)
        b.close()

    order = _query(db, "SELECT * FROM orders WHERE number = ?", number)[0]
    items = _query(db, "SELECT product_id, quantity FROM order_items WHERE order_id = ? ORDER BY id", order["id"])
    assert [tuple(i) for i in items] == [tuple(c) for c in cart]
    subtotal = sum(
        logic.unit_price(_query(db, "SELECT * FROM products WHERE id = ?", i["product_id"])[0]) * i["quantity"]
        for i in items
    )
    expected = logic.compute_totals(subtotal, "expedited", None, dict(logic.DEFAULT_SETTINGS))
    assert (order["status"], order["total_cents"], order["card_last4"]) == ("processing", expected.total, "4242")
    assert order["created_at"].startswith("2025-06-14T09:")  # the site clock, not the wall clock
    ordered = dict((r["product_id"], r["quantity"]) for r in items)[product["id"]]
    assert ordered >= 3
    assert _query(db, "SELECT stock FROM products WHERE id = ?", product["id"])[0][0] == product["stock"] - ordered
    assert not _query(db, "SELECT 1 FROM cart_items WHERE customer_id = 1")
    actions = [(row["action"], row["actor"]) for row in _audit(db)]
    assert actions == [
        ("auth.login_failed", "anonymous"),
        ("auth.login", emma["email"]),
        ("cart.add", emma["email"]),
        ("checkout.shipping", emma["email"]),
        ("checkout.coupon_rejected", emma["email"]),
        ("order.place", emma["email"]),
    ]
    placed = _audit(db, "order.place")[0]
    assert placed["target_id"] == number and json.loads(placed["details"])["total_cents"] == expected.total


def test_shop_same_actions_same_data(tmp_path: Path, cache: Path) -> None:
    """Timestamps come from the seed's clock: replaying the same actions later yields the same rows."""
    from mcpfleet.sites.shop.app import make_site

    rows = []
    for run in range(2):
        db = seed("shop", tmp_path / f"run{run}", cache=cache)
        with TestClient(create_app(make_site(), db.parent)) as client:
            page = client.get("/login")
            token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
            client.post(
                "/login", data={"csrf_token": token, "email": "olivia.chen@example.org", "password": "Sunflower9"}
            )
            token = CSRF.search(client.get("/account").text).group(1)  # type: ignore[union-attr]
            client.post("/wishlist/add", data={"csrf_token": token, "product_id": "5"})
            client.post(
                "/account/addresses/new",
                data={
                    "csrf_token": token,
                    "full_name": "Olivia Chen",
                    "line1": "9 Pine St",
                    "city": "Boise",
                    "region": "ID",
                    "postcode": "83702",
                },
            )
        rows.append(
            (
                [tuple(r) for r in _query(db, "SELECT * FROM wishlist_items WHERE customer_id = 2")],
                [tuple(r) for r in _query(db, "SELECT * FROM addresses WHERE customer_id = 2")],
                [(r["action"], r["target_id"], r["site_time"], r["details"]) for r in _audit(db)],
            )
        )
        time.sleep(1.1)  # a later wall-clock second must not matter
    assert rows[0] == rows[1]
    assert rows[0][2][-1][0] == "address.create"


# -- the admin panel ----------------------------------------------------------------------------------------
def test_admin_status_change_export_and_permissions(tmp_path: Path, cache: Path, env: dict[str, str]) -> None:
    db = seed("admin", tmp_path / "data", cache=cache)
    creds = {a["username"]: a["password"] for a in _credentials("admin")["accounts"]}
    order = _query(db, "SELECT * FROM orders WHERE status = 'processing' ORDER BY id LIMIT 1")[0]
    with running("admin", tmp_path / "data", env, tmp_path) as site:
        assert site.cpu < START_CPU_LIMIT, f"admin used {site.cpu:.2f} s CPU to start"
        b = Browser(site.url)
        assert b.get("/orders").url.path == "/login"  # everything behind sign-in
        r = b.submit("/login", "/login", {"username": "admin", "password": creds["admin"]})
        assert r.url.path == "/" and "Dashboard" in r.text

        # shipping needs a tracking number: a validation error, then the change
        page = f"/orders/{order['number']}"
        r = b.submit(page, f"{page}/status", {"status": "shipped", "comment": "Left the dock."})
        assert r.status_code == 422
        assert "A tracking number is required to mark an order as shipped." in ERRORS.findall(r.text)
        r = b.submit(page, f"{page}/status", {"status": "shipped", "tracking_number": "1ZTEST123", "notify": "1"})
        assert r.status_code == 200 and f"Order #{order['number']} is now shipped." in FLASH.findall(r.text)

        # CSV export of a filtered list: a download whose rows are exactly the filtered orders
        listing = b.get("/orders?status=shipped&sort=total_desc")
        export = re.search(r'href="(/orders/export\.csv\?[^"]+)" download', listing.text).group(1)  # type: ignore[union-attr]
        r = b.get(export.replace("&amp;", "&"))
        assert r.headers["content-type"].startswith("text/csv")
        assert r.headers["content-disposition"] == 'attachment; filename="orders-2025-06-14.csv"'
        rows = list(csv.DictReader(io.StringIO(r.text)))
        shipped = _query(
            db, "SELECT number, total_cents FROM orders WHERE status = 'shipped' ORDER BY total_cents DESC, id DESC"
        )
        assert [(x["order_number"], x["total"]) for x in rows] == [
            (s["number"], f"{s['total_cents'] / 100:.2f}") for s in shipped
        ]
        assert order["number"] in {x["order_number"] for x in rows}
        b.submit("/", "/logout", {})

        # support staff may not edit products: 403, nothing written
        r = b.submit("/login", "/login", {"username": "tbennett", "password": creds["tbennett"]})
        assert r.url.path == "/"
        before = _query(db, "SELECT * FROM products WHERE id = 1")[0]
        r = b.submit("/products/1/edit", "/products/1/edit", {"name": "Hacked", "sku": before["sku"]})
        assert r.status_code == 403 and "not allowed to edit products" in r.text
        b.close()

    after = _query(db, "SELECT * FROM orders WHERE id = ?", order["id"])[0]
    assert (after["status"], after["tracking_number"]) == ("shipped", "1ZTEST123")
    history = _query(db, "SELECT * FROM order_history WHERE order_id = ? ORDER BY id DESC LIMIT 1", order["id"])[0]
    assert (history["status"], history["author"], history["notify_customer"]) == ("shipped", "Dana Whitfield", 1)
    assert tuple(_query(db, "SELECT * FROM products WHERE id = 1")[0]) == tuple(before)
    changes = [(r["actor"], r["action"], r["target_id"]) for r in _audit(db) if not r["action"].startswith("auth.")]
    assert changes == [("admin", "order.status", order["number"]), ("admin", "orders.export", "orders")]
    assert json.loads(_audit(db, "order.status")[0]["details"]) == {
        "old": "processing",
        "new": "shipped",
        "tracking": "1ZTEST123",
        "notify": True,
    }
    assert json.loads(_audit(db, "orders.export")[0]["details"])["rows"] == len(rows)


# -- the forum ----------------------------------------------------------------------------------------------
def test_forum_post_vote_comment_and_moderation(tmp_path: Path, cache: Path, env: dict[str, str]) -> None:
    db = seed("forum", tmp_path / "data", cache=cache)
    creds = {a["username"]: a["password"] for a in _credentials("forum")["accounts"]}
    with running("forum", tmp_path / "data", env, tmp_path) as site:
        assert site.cpu < START_CPU_LIMIT, f"forum used {site.cpu:.2f} s CPU to start"
        b = Browser(site.url)
        r = b.submit("/login", "/login", {"username": "spammer_sam", "password": creds["spammer_sam"]})
        assert "This account has been banned from Commonplace." in ERRORS.findall(r.text)
        r = b.submit("/login", "/login", {"username": "quietfox", "password": creds["quietfox"]})
        assert "Your feed" in r.text

        r = b.submit("/submit", "/submit", {"forum": "cooking", "title": ""})
        assert r.status_code == 422 and "Title is required." in ERRORS.findall(r.text)
        r = b.submit(
            "/submit",
            "/submit",
            {"forum": "cooking", "title": "Brown butter in everything?", "body": "Tried it in cookies and pasta."},
        )
        post_id = int(r.url.path.split("/")[3])
        r = b.submit(r.url.path, f"/p/{post_id}/vote", {"value": "1"})
        assert "Upvoted." in FLASH.findall(r.text)
        r = b.submit(r.url.path, f"/p/{post_id}/comments", {"body": "Try it on popcorn too."})
        comment_id = int(_query(db, "SELECT MAX(id) FROM comments")[0][0])
        assert f'id="c{comment_id}"' in r.text
        b.submit("/", "/logout", {})

        # trollbait is banned from f/cooking: his comment is refused
        b.submit("/login", "/login", {"username": "trollbait", "password": creds["trollbait"]})
        r = b.submit(r.url.path, f"/p/{post_id}/comments", {"body": "lol"})
        assert r.status_code == 403 and "You are banned from f/cooking" in r.text
        b.submit("/", "/logout", {})

        # the moderator works the queue: removes the oldest open reported comment in f/cooking
        b.submit("/login", "/login", {"username": "juniper_mod", "password": creds["juniper_mod"]})
        queue = b.get("/mod?forum=cooking&status=open")
        report_ids = [int(x) for x in re.findall(r'action="/mod/reports/(\d+)/remove"', queue.text)]
        assert report_ids
        report = _query(db, "SELECT * FROM reports WHERE id = ?", report_ids[-1])[0]
        r = b.submit("/mod?forum=cooking", f"/mod/reports/{report['id']}/remove", {"reason": ""})
        assert "Give a removal reason (it is shown to the author)." in FLASH.findall(r.text)
        r = b.submit("/mod?forum=cooking", f"/mod/reports/{report['id']}/remove", {"reason": "Rule 1: be civil"})
        assert f"report #{report['id']} closed" in r.text
        b.close()

    post = _query(db, "SELECT * FROM posts WHERE id = ?", post_id)[0]
    assert (post["author_id"], post["score"], post["comment_count"]) == (3, 1, 1)
    assert post["created_at"].startswith("2025-06-14T12:")
    assert _query(db, "SELECT value FROM post_votes WHERE post_id = ? AND user_id = 3", post_id)[0][0] == 1
    kind = "post" if report["post_id"] else "comment"
    target = _query(db, f"SELECT * FROM {kind}s WHERE id = ?", report[f"{kind}_id"])[0]
    assert (target["removed_by"], target["removed_reason"]) == (2, "Rule 1: be civil")
    assert tuple(_query(db, "SELECT status, resolved_by FROM reports WHERE id = ?", report["id"])[0]) == ("actioned", 2)
    changes = [(r["actor"], r["action"]) for r in _audit(db) if not r["action"].startswith("auth.")]
    assert changes == [
        ("quietfox", "post.create"),
        ("quietfox", "vote.post"),
        ("quietfox", "comment.create"),
        ("juniper_mod", f"{kind}.remove"),
    ]
    assert [r["actor"] for r in _audit(db, "auth.login_failed")] == ["anonymous"]


# -- cross-cutting ------------------------------------------------------------------------------------------
def _site(name: str) -> Site:
    module = __import__(f"mcpfleet.sites.{name}.app", fromlist=["make_site"])
    site: Site = module.make_site()
    return site


def _sample_path(path: str) -> str:
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: "1" if m.group(2) == ":int" or m.group(1) == "id" else "x", path)


@pytest.mark.parametrize("name", ["shop", "admin", "forum"])
def test_every_post_route_needs_the_csrf_token(name: str, tmp_path: Path, cache: Path) -> None:
    """No POST handler runs without the session's token: missing, wrong and cross-session tokens all get 403."""
    db = seed(name, tmp_path / "data", cache=cache)
    site = _site(name)
    posts = [path for path, _, methods in site.routes.entries if "POST" in methods]
    assert len(posts) >= 8
    app = create_app(site, db.parent)
    with TestClient(app) as stranger, TestClient(app) as client:
        other = CSRF.search(stranger.get("/login").text).group(1)  # type: ignore[union-attr]
        assert CSRF.search(client.get("/login").text)  # this client now has its own session
        before = len(_audit(db))
        for path in posts:
            for data in ({}, {"csrf_token": "forged"}, {"csrf_token": other}):
                r = client.post(_sample_path(path), data=data, follow_redirects=False)
                assert r.status_code == 403, f"POST {path} with {data} answered {r.status_code}"
        assert len(_audit(db)) == before
        r = client.get("/no/such/page")
        assert r.status_code == 404 and '<h1 id="error-title">Page not found</h1>' in r.text


def test_site_exits_with_its_parent(tmp_path: Path, cache: Path, env: dict[str, str]) -> None:
    """--exit-with-parent: SIGKILL the process that started the site; the site is gone within seconds."""
    seed("forum", tmp_path / "data", cache=cache)
    launcher = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'mcpfleet.sites.forum', '--data', {str(tmp_path / 'data')!r},"
        " '--port', '0', '--exit-with-parent'], stdout=subprocess.PIPE, text=True)\n"
        "print(p.pid, p.stdout.readline().split()[-1], flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    try:
        assert parent.stdout is not None
        pid_text, url = parent.stdout.readline().split()
        child = int(pid_text)
        assert httpx.get(f"{url}/healthz").text == "ok"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the site outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout:
            parent.stdout.close()


def _serve_fd(fd: int, data: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcpfleet.sites.forum", "--data", str(data), "--fd", str(fd), "--exit-with-parent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        pass_fds=(fd,),
    )


def test_site_serves_a_socket_its_launcher_reserved(tmp_path: Path, cache: Path, env: dict[str, str]) -> None:
    """--fd: the launcher binds a port first (refused while not listening) and hands the socket over; the site
    listens on that very port. A descriptor that is not a bound TCP socket is refused with a clear error."""
    seed("forum", tmp_path / "data", cache=cache)
    reserved = socket.socket()
    reserved.bind(("127.0.0.1", 0))
    port = reserved.getsockname()[1]
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # bound, not listening: refused
    proc = _serve_fd(reserved.fileno(), tmp_path / "data", env, tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == f"forum serving http://127.0.0.1:{port}\n"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").text == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=5)
        reserved.close()
    unbound = socket.socket()
    with open(tmp_path / "file", "w") as not_a_socket:
        for fd, why in ((unbound.fileno(), "is not bound to a port"), (not_a_socket.fileno(), "is not an open socket")):
            bad = _serve_fd(fd, tmp_path / "data", env, tmp_path)
            out, err = bad.communicate(timeout=30)
            assert bad.returncode == 2 and out == "" and f"error: --fd {fd} {why}" in err, err
    unbound.close()


def test_credentials_files_match_the_generators() -> None:
    from mcpfleet.sites.forum import seed as forum_seed
    from mcpfleet.sites.store import seed as store_seed

    shop = _credentials("shop")
    assert [(a["email"], a["password"]) for a in shop["accounts"]] == [
        (c.email, c.password) for c in store_seed.CUSTOMERS
    ]
    assert shop["default_password"] == store_seed.DEFAULT_PASSWORD
    admin = _credentials("admin")
    assert [(a["username"], a["password"], a["role"]) for a in admin["accounts"]] == [
        (a.username, a.password, a.role) for a in store_seed.ADMINS
    ]
    forum = _credentials("forum")
    assert [(a["username"], a["password"]) for a in forum["accounts"]] == [
        (u.username, u.password) for u in forum_seed.USERS
    ]
    assert forum["default_password"] == forum_seed.DEFAULT_PASSWORD


def test_a_mistyped_password_before_the_right_one_fails_no_shop_task(tmp_path: Path, cache: Path) -> None:
    """A failed sign-in is an audit row (auth.login_failed) but changes nothing: a verifier that holds the audit
    log to the customer's own actions must not fail a right end state for it (it did, for four shop tasks)."""
    from mcpfleet.sites.shop.app import make_site

    db = seed("shop", tmp_path / "data", cache=cache)
    with TestClient(create_app(make_site(), db.parent)) as client:
        for password in ("bluebird42", "Bluebird42"):  # a typo, then the right one
            token = CSRF.search(client.get("/login").text).group(1)  # type: ignore[union-attr]
            client.post("/login", data={"csrf_token": token, "email": "noah.kim@example.net", "password": password})
        conn = sqlite3.connect(db)
        for name in ("Trailhead 3-Season Headlamp", "Deskwise Wireless-Charging LED Desk Lamp"):
            pid = conn.execute("SELECT id FROM products WHERE name = ?", (name,)).fetchone()[0]
            token = CSRF.search(client.get("/account").text).group(1)  # type: ignore[union-attr]
            client.post("/wishlist/add", data={"csrf_token": token, "product_id": str(pid)})
        conn.close()
    assert [r["action"] for r in _audit(db)][-4:] == ["auth.login_failed", "auth.login", "wishlist.add", "wishlist.add"]
    verify = (
        Path(__file__).resolve().parents[1]
        / "tasks"
        / "playwright"
        / "easy"
        / "shop_account"
        / "wishlist_add_two"
        / "verify.py"
    )
    done = subprocess.run(
        [sys.executable, str(verify)],
        env={**os.environ, "MCPFLEET_SITES_DATA": str(db.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
