"""The viewer's pages, rendered from the run index and a trial's files (pure: no I/O but the templates).

Every value reaches the page through jinja2 with autoescape on: model output, tool results, task text and file
contents are text, never markup. Links are built here from the index (trial ids, filter values, all URL-quoted),
never taken from a transcript, so no ``javascript:`` link can come from one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import jinja2

from mcpfleet.runner.environment.invocation import recorded_verifier
from mcpfleet.runner.report.viewer.comparison import Comparison
from mcpfleet.runner.report.viewer.index import FILTERS, TrialRow, facets, label
from mcpfleet.runner.report.viewer.logs import cause_line
from mcpfleet.runner.report.viewer.matrix import SORTS, Matrix, MatrixRow
from mcpfleet.runner.report.viewer.search import Found
from mcpfleet.runner.report.viewer.transcript import Entry, Transcript
from mcpfleet.runner.spec import mcpmark_protocol as protocol

TEMPLATES = Path(__file__).parent / "templates"
PAGE_SIZE = 200  # trials per list page
MATRIX_ROWS = 100  # task rows per service on a matrix page (a browser lays out 1,250 of them in over a second)
PAGE_CHARS = 1_000_000  # a transcript page's text: later entries on the next page
PAGE_ENTRIES = 400  # and its entries (a page's DOM stays small however short they are)
FOLD_CHARS = 1_500  # an entry longer than this is folded (<details>)
INLINE_CHARS = 200_000  # a folded entry's text on the page; the rest through its raw link
PREVIEW_CHARS = 240

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@functools.lru_cache(maxsize=65_536)
def _quoted(text: str) -> str:
    """One key or value as ``urlencode`` quotes it (a matrix repeats the same few values thousands of times)."""
    return quote_plus(text)


def url(path: str, params: Mapping[str, Any] | None = None) -> str:
    """``path`` with the query string of ``params`` (lists as repeated keys, empty values left out), as
    ``urlencode`` makes it."""
    items = []
    for k, v in (params or {}).items():
        for one in v if isinstance(v, list | tuple) else [v]:
            if one is not None and one != "":
                items.append(f"{_quoted(str(k))}={_quoted(str(one))}")
    return path + ("?" + "&".join(items) if items else "")


def trial_url(run: int, trial_id: str) -> str:
    return f"/run/{run}/trial/{quote(trial_id, safe='')}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _money(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


_env.filters.update(pct=_pct, money=_money)
_env.globals.update(url=url, label=label, trial_url=trial_url, FILTERS=FILTERS)


def render(template: str, **context: Any) -> str:
    return _env.get_template(template).render(**context)


def run_shape(rows: Sequence[TrialRow]) -> tuple[int, int, int, str]:
    """(trials, tasks, attempts, harnesses) of a run, as the runs page lists them."""
    tasks = len({(r.service, r.task_id) for r in rows})
    return len(rows), tasks, max((r.attempt for r in rows), default=0), ", ".join(sorted({r.harness for r in rows}))


def runs_page(runs: Sequence[Any]) -> str:
    shapes = [run_shape(r.rows) for r in runs]
    task_sets = {frozenset((r.service, r.task_id) for r in run.rows) for run in runs}
    warning = (
        "" if len(task_sets) < 2 else "these runs' task sets differ: their pass rates do not measure the same tasks"
    )
    return render("runs.html", title="runs", runs=list(enumerate(runs)), shapes=shapes, warning=warning)


@dataclass(frozen=True)
class CellView:
    """A matrix cell as the page shows it, worked out here once: a 10,000-trial matrix has thousands of cells, and
    each method the template called per cell cost more than the rest of the page."""

    href: str
    marks: list[tuple[str, str, str]]
    rate: str
    why: str


def matrix_rows(run_index: int, m: Matrix) -> list[tuple[MatrixRow, str, list[CellView | None]]]:
    """Each row of ``m`` with its task link and its cells in column order (None: no attempt there)."""
    trials = f"/run/{run_index}/trials"
    out = []
    for r in m.rows:
        cells: list[CellView | None] = []
        for col, model, variant in m.columns:
            cell = r.cells.get(col)
            if cell is None:
                cells.append(None)
                continue
            params = {"service": m.service, "task": r.task, "category": r.category, "model": model, "variant": variant}
            cells.append(CellView(url(trials, params), cell.marks(), _pct(cell.pass_rate), ", ".join(cell.failures())))
        out.append((r, url(trials, {"service": m.service, "task": r.task}), cells))
    return out


@dataclass(frozen=True)
class RowsShown:
    """Which of a service's task rows a matrix page shows, and the links to the others."""

    first: int  # 1-based
    last: int
    total: int
    previous: str | None
    next: str | None
    all_of_them: str | None  # the service's every row on one page


def matrix_slice(
    run_index: int, m: Matrix, sort: str, service: str | None, page: int, per_page: int
) -> tuple[list[MatrixRow], RowsShown]:
    """The rows of ``m`` a page shows: ``per_page`` of them (its ``page``-th when the page is this service's own,
    ``?service=``), every one with ``per_page`` 0; and where the rest are."""
    n = len(m.rows)
    own = service == m.service
    if per_page <= 0 or n <= per_page:
        return m.rows, RowsShown(1 if n else 0, n, n, None, None, None)
    pages = -(-n // per_page)
    page = min(max(page, 1), pages) if own else 1
    start = (page - 1) * per_page
    shown = m.rows[start : start + per_page]
    base = f"/run/{run_index}"

    def at(p: int) -> str:
        return url(base, {"sort": sort if sort != "task" else "", "service": m.service, "page": p})

    return shown, RowsShown(
        start + 1,
        start + len(shown),
        n,
        at(page - 1) if page > 1 else None,
        at(page + 1) if page < pages else None,
        url(base, {"sort": sort if sort != "task" else "", "service": m.service, "rows": "all"}),
    )


def matrix_page(
    run_index: int,
    run: Any,
    matrices: list[Matrix],
    sort: str,
    service: str | None = None,
    page: int = 1,
    per_page: int = 0,
) -> str:
    """The matrix page: every service's (``service``: that one's only), each at most ``per_page`` task rows (0: all;
    a 10,000-trial run can have thousands of tasks, and a browser lays a table of them out in seconds)."""
    shown = []
    for m in matrices:
        if service is not None and m.service != service:
            continue
        rows, where = matrix_slice(run_index, m, sort, service, page, per_page)
        shown.append((m, matrix_rows(run_index, replace(m, rows=rows)), where))
    return render(
        "matrix.html",
        title=f"{run.label}: matrix",
        run_index=run_index,
        run=run,
        matrices=shown,
        sort=sort,
        sorts=SORTS,
        service=service,
        whole=url(f"/run/{run_index}", {"sort": sort if sort != "task" else ""}),
    )


def trials_page(
    run_index: int,
    run: Any,
    rows: list[TrialRow],
    params: Mapping[str, list[str]],
    page: int,
    found: Found | None,
) -> str:
    snippets = {h.trial_id: h for h in found.hits} if found else {}
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    shown = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    here = {k: v for k, v in params.items() if k in FILTERS or k == "q"}
    return render(
        "trials.html",
        title=f"{run.label}: trials",
        run_index=run_index,
        run=run,
        rows=shown,
        total=len(rows),
        page=page,
        pages=pages,
        params=here,
        chosen={k: set(v) for k, v in here.items()},
        facets=facets(run.rows),
        q=(params.get("q") or [""])[0],
        found=found,
        snippets=snippets,
    )


@dataclass
class Shown:
    """One transcript entry as the trial page shows it."""

    index: int
    entry: Entry
    head: str  # the start of a folded entry's text
    body: str  # its text on the page (all of it, or the first INLINE_CHARS)
    folded: bool
    cut: bool  # the page holds only the first INLINE_CHARS: the rest through the raw link
    turn: dict[str, Any] | None


def _fits(transcript: Transcript, start: int) -> int:
    """Where the page starting at ``start`` ends (the next page's start, or the number of entries)."""
    chars = 0
    for i in range(start, len(transcript.entries)):
        size = min(len(transcript.entries[i].text), INLINE_CHARS)
        if i > start and (chars + size > PAGE_CHARS or i - start >= PAGE_ENTRIES):
            return i
        chars += size
    return len(transcript.entries)


def page_starts(transcript: Transcript) -> list[int]:
    """The first entry of each page of the transcript."""
    starts = [0]
    while (end := _fits(transcript, starts[-1])) < len(transcript.entries):
        starts.append(end)
    return starts


def entries_page(transcript: Transcript, start: int, turns: list[dict[str, Any]]) -> tuple[list[Shown], int | None]:
    """The entries from ``start`` that fit one page, and where the next page starts (None: this is the last)."""
    end = _fits(transcript, start)
    out: list[Shown] = []
    for i in range(start, end):
        e = transcript.entries[i]
        folded = len(e.text) > FOLD_CHARS or e.text.count("\n") > 30
        ok = e.turn and 0 < e.turn <= len(turns)
        turn = turns[e.turn - 1] if ok and e.turn else None
        out.append(Shown(i, e, e.text[:PREVIEW_CHARS], e.text[:INLINE_CHARS], folded, len(e.text) > INLINE_CHARS, turn))
    return out, (end if end < len(transcript.entries) else None)


def cases_shown(raw: bytes | None, most: int = 2_000) -> tuple[list[tuple[str, str]], int]:
    """A toolcall trial's cases.jsonl as (summary, pretty JSON) per case, at most ``most``; and how many there are."""
    if not raw:
        return [], 0
    lines = [ln for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()]
    out = []
    for ln in lines[:most]:
        try:
            case = json.loads(ln)
        except ValueError:
            out.append((ln[:PREVIEW_CHARS], ln))
            continue
        if isinstance(case, dict):
            head = " · ".join(f"{k}: {case[k]}" for k in ("id", "label", "class", "passed") if k in case)
        else:
            head = ""
        out.append((head or ln[:PREVIEW_CHARS], json.dumps(case, indent=2, ensure_ascii=False)))
    return out, len(lines)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) if value is not None else ""


def system_prompt_note(transcript: Transcript, agent: str) -> str | None:
    """The system prompt the agent sent when messages.json leaves it out (MCPMark's items never hold it)."""
    if any(e.kind == "system" for e in transcript.entries):
        return None
    if agent == "mcpmark":
        return protocol.text("system_prompt")
    if agent == "react":
        return protocol.text("react.system_prompt")
    return None


def trial_page(
    run_index: int,
    run: Any,
    row: TrialRow,
    record: Mapping[str, Any] | None,
    transcript: Transcript,
    start: int,
    log: str,
    meta: Any,
    cases: bytes | None = None,
) -> str:
    rec = dict(record or {})
    turns = [t for t in rec.get("turns") or [] if isinstance(t, dict)]
    starts = page_starts(transcript)
    start = max([s for s in starts if s <= start], default=0)  # a page's own start, whatever ?from= says
    shown, next_start = entries_page(transcript, start, turns)
    case_rows, case_count = cases_shown(cases)
    verifier, verifier_command = recorded_verifier(rec)
    return render(
        "trial.html",
        title=row.trial_id,
        run_index=run_index,
        run=run,
        row=row,
        rec=rec,
        transcript=transcript,
        shown=shown,
        start=start,
        next_start=next_start,
        previous_start=max([s for s in starts if s < start], default=None),
        page_number=starts.index(start) + 1,
        page_count=len(starts),
        cases=case_rows,
        case_count=case_count,
        total=len(transcript.entries),
        turns=turns,
        log=log,
        cause=cause_line(log) if row.outcome == "not_scored" else "",
        meta_verification=_pretty((meta or {}).get("execution_result")) if isinstance(meta, dict) else "",
        system_prompt=system_prompt_note(transcript, str(rec.get("agent") or "")),
        server=rec.get("server") if isinstance(rec.get("server"), dict) else None,
        verifier=verifier,
        verifier_command=verifier_command,
        timings=rec.get("timings") if isinstance(rec.get("timings"), dict) else {},
        totals=rec.get("totals") if isinstance(rec.get("totals"), dict) else {},
    )


def compare_page(runs: Sequence[Any], chosen: list[str], result: Comparison | None, problem: str) -> str:
    options = []
    for i, r in enumerate(runs):
        options.append((str(i), r.label))
        for v in sorted({row.variant for row in r.rows if row.variant}):
            options.append((f"{i}:{v}", f"{r.label}: variant {v}"))
    return render(
        "compare.html",
        title="comparison",
        options=options,
        chosen=chosen,
        result=result,
        problem=problem,
        side_runs=_side_runs(chosen),
    )


def _side_runs(chosen: list[str]) -> list[int]:
    out = []
    for c in chosen:
        head = c.split(":", 1)[0]
        out.append(int(head) if head.isdigit() else 0)
    return out
