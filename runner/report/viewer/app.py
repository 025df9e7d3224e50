"""``mcpfleet view``'s web app: the pages of runs/pages.py served by starlette, state in the query string.

Sync endpoints (starlette runs them in its thread pool): each reads what its page needs from the run's store.
Every response forbids scripts but the viewer's own file and any request off the page's origin (Content-Security-
Policy), a second wall behind the templates' escaping.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpfleet.runner.report.viewer import pages
from mcpfleet.runner.report.viewer.comparison import Side, comparison
from mcpfleet.runner.report.viewer.index import filter_rows
from mcpfleet.runner.report.viewer.matrix import SORTS, matrices
from mcpfleet.runner.report.viewer.runs import Run
from mcpfleet.runner.report.viewer.search import Found, scan

STATIC = Path(__file__).parent / "static"
MATRIX_PAGES_KEPT = 64  # rendered matrix pages kept per run (sorts x services x pages): the index never changes
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)


class _Headers:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, sending)


def _bad(why: str, status: int = 400) -> Response:
    return PlainTextResponse(why + "\n", status_code=status)


def _int(text: str | None, default: int) -> int:
    return int(text) if text and text.isdigit() else default


def make_app(runs: list[Run], search_index: bool = False) -> ASGIApp:
    """The viewer's app; ``search_index``: each local run's search index opened when one was built for its folder's
    state, else built once the run was first searched (runs.Run.searched)."""
    lock = threading.Lock()
    if search_index:
        for run in runs:
            run.build_index_on_search = True
            run.open_search_index()

    def run_of(request: Request) -> tuple[int, Run] | Response:
        i = int(request.path_params["run"])
        if not 0 <= i < len(runs):
            return _bad(f"run {i}: no such run; this viewer shows runs 0-{len(runs) - 1}", 404)
        return i, runs[i]

    def index(request: Request) -> Response:
        if len(runs) == 1:
            return RedirectResponse("/run/0", status_code=302)
        return HTMLResponse(pages.runs_page(runs))

    def matrix(request: Request) -> Response:
        got = run_of(request)
        if isinstance(got, Response):
            return got
        i, run = got
        sort = request.query_params.get("sort", "task")
        if sort not in SORTS:
            return _bad(f"sort={sort}: not a sort order; give one of {', '.join(SORTS)}")
        service = request.query_params.get("service") or None
        if service is not None and service not in run.services:
            return _bad(f"service={service}: {run.label} has no such service; give one of {', '.join(run.services)}")
        rows = request.query_params.get("rows", "")
        if rows not in ("", "all"):
            return _bad(f"rows={rows}: give rows=all (every task of a service on one page) or leave it out")
        per_page = 0 if rows == "all" else pages.MATRIX_ROWS
        page = _int(request.query_params.get("page"), 1) if service else 1
        key = (sort, service, page, per_page)
        html = run.matrix_pages.get(key)
        if html is None:
            html = pages.matrix_page(i, run, matrices(run.rows, sort), sort, service, page, per_page)
            if len(run.matrix_pages) < MATRIX_PAGES_KEPT:
                run.matrix_pages[key] = html
        return HTMLResponse(html)

    def trials(request: Request) -> Response:
        got = run_of(request)
        if isinstance(got, Response):
            return got
        i, run = got
        params = {k: request.query_params.getlist(k) for k in request.query_params}
        rows = filter_rows(run.rows, params)
        q = request.query_params.get("q", "").strip()
        found = None
        if q:
            ids = tuple(r.trial_id for r in rows)

            def search() -> Found:  # the search index's candidates only, once it is ready
                return scan(q, ids, run.read, candidates=run.candidates(q))

            with lock:  # one scan at a time (the machine's disk and cores are the limit), each answer cached
                found = run.searches.get((run.ref, q, ids), search)
            run.searched()
            hit = {h.trial_id for h in found.hits}
            rows = [r for r in rows if r.trial_id in hit]
        page = _int(request.query_params.get("page"), 1)
        return HTMLResponse(pages.trials_page(i, run, rows, params, page, found))

    def trial(request: Request) -> Response:
        got = run_of(request)
        if isinstance(got, Response):
            return got
        i, run = got
        trial_id = request.path_params["trial"]
        row = run.by_id.get(trial_id)
        if row is None:
            return _bad(f"{trial_id}: no such trial in {run.label}", 404)
        with lock:
            rec, transcript = run.transcript(trial_id)
        start = min(_int(request.query_params.get("from"), 0), max(0, len(transcript.entries) - 1))
        log = (run.read(trial_id, "trial.log") or b"").decode("utf-8", "replace")
        meta = None
        raw_meta = run.read(trial_id, "meta.json")
        if raw_meta:
            try:
                meta = json.loads(raw_meta)
            except ValueError:
                meta = None
        cases = run.read(trial_id, "cases.jsonl")
        return HTMLResponse(pages.trial_page(i, run, row, rec, transcript, start, log, meta, cases))

    def entry(request: Request) -> Response:
        got = run_of(request)
        if isinstance(got, Response):
            return got
        _, run = got
        trial_id = request.path_params["trial"]
        if trial_id not in run.by_id:
            return _bad(f"{trial_id}: no such trial in {run.label}", 404)
        with lock:
            _, transcript = run.transcript(trial_id)
        n = int(request.path_params["n"])
        if not 0 <= n < len(transcript.entries):
            return _bad(f"entry {n}: {trial_id}'s transcript has {len(transcript.entries)} entries", 404)
        return PlainTextResponse(transcript.entries[n].text)

    def compare(request: Request) -> Response:
        chosen = request.query_params.getlist("side")
        result, problem = None, ""
        if chosen:
            sides = []
            for c in chosen:
                head, _, variant = c.partition(":")
                if not head.isdigit() or int(head) >= len(runs):
                    problem = f"side={c}: not a run; give a run's number (0-{len(runs) - 1}), or <run>:<variant>"
                    break
                run = runs[int(head)]
                rows = [r for r in run.rows if not variant or r.variant == variant]
                if not rows:
                    problem = f"side={c}: {run.label} has no trials of variant {variant!r}"
                    break
                sides.append(Side(f"{run.label}:{variant}" if variant else run.label, rows, bool(variant)))
            if not problem:
                try:
                    result = comparison(sides)
                except ValueError as exc:
                    problem = str(exc)
        return HTMLResponse(pages.compare_page(runs, chosen, result, problem), status_code=400 if problem else 200)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/run/{run:int}", matrix),
            Route("/run/{run:int}/trials", trials),
            Route("/run/{run:int}/trial/{trial}", trial),
            Route("/run/{run:int}/trial/{trial}/entry/{n:int}", entry),
            Route("/compare", compare),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        ]
    )
    return _Headers(app)
