"""``mcpfleet show``: the matrix and one trial's transcript as rich renderables (pure; the command prints them).

The same index, matrix and normaliser as the web pages. Text from a run is given to rich as ``Text`` (never
parsed as markup) after ``printable`` took out terminal control sequences, so a tool result cannot restyle or
drive the terminal. Long entries are cut at ``FOLD_CHARS`` with a line saying how much was left out and how to
see it (``mcpfleet view``, or the entry's text with ``--full``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mcpfleet.runner._util.printable import printable
from mcpfleet.runner.environment.invocation import recorded_verifier
from mcpfleet.runner.report.viewer.index import NOT_SCORED, TrialRow, label
from mcpfleet.runner.report.viewer.logs import cause_line
from mcpfleet.runner.report.viewer.matrix import Matrix
from mcpfleet.runner.report.viewer.transcript import Transcript

FOLD_CHARS = 2_000
_STYLE = {"pass": "green", "fail": "red", "unscored": "dim"}
_BORDER = {"system": "white", "user": "blue", "assistant": "green", "thought": "green", "tool_call": "yellow"}


def _t(value: object, style: str = "") -> Text:
    return Text(printable(value, one_line=False), style=style)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def matrix_tables(matrices: list[Matrix]) -> Iterator[Table]:
    for m in matrices:
        table = Table(title=_t(m.service), title_justify="left")
        table.add_column("task")
        table.add_column("difficulty")
        for col, _, _ in m.columns:
            rate = m.column_rate(col)
            table.add_column(_t(f"{col}\n{'–' if rate is None else f'{rate:.0%}'}"), no_wrap=True)
        for r in m.rows:
            cells: list[Text] = [_t(f"{r.category}/{r.task}"), _t(r.difficulty)]
            for col, _, _ in m.columns:
                cell = r.cells.get(col)
                text = Text()
                if cell is not None:
                    for cls, mark, _ in cell.marks():
                        text.append(mark, style=_STYLE[cls])
                    text.append(f" {'–' if cell.pass_rate is None else f'{cell.pass_rate:.0%}'}")
                cells.append(text)
            table.add_row(*cells)
        yield table


def trial_view(row: TrialRow, rec: Mapping[str, Any] | None, transcript: Transcript, log: str, full: bool) -> Group:
    rec = rec or {}
    parts: list[RenderableType] = []
    head = Text()
    head.append(printable(row.trial_id), style="bold")
    head.append("  ")
    head.append(printable(label(row)), style="green" if row.outcome == "passed" else "red")
    parts.append(head)
    server = _dict(rec.get("server"))
    facts = [
        f"model {row.model} ({rec.get('litellm_model', '')}), agent {rec.get('agent', '')}",
        f"harness {rec.get('harness') or '?'}; server {server.get('name') or '?'} {server.get('version') or ''}",
    ]
    if rec.get("error"):
        facts.append(f"error: {rec['error']}")
    if row.outcome == NOT_SCORED and (cause := cause_line(log)):
        facts.append(f"cause (trial.log): {cause}")
    parts += [_t(f, "dim") for f in facts]
    for p in transcript.problems:
        parts.append(_t(f"note: {p}", "yellow"))
    turns = [t for t in rec.get("turns") or [] if isinstance(t, dict)]
    for i, e in enumerate(transcript.entries):
        title = e.kind.replace("_", " ") + (f" {e.name}" if e.name else "")
        if e.call_class:
            title += f" [{e.call_class}]"
        if e.is_error:
            title += " error"
        if e.turn and e.turn <= len(turns):
            t = turns[e.turn - 1]
            title += f" · turn {e.turn}: {t.get('input_tokens', 0)} in / {t.get('output_tokens', 0)} out"
        text = e.text
        if not full and len(text) > FOLD_CHARS:
            text = text[:FOLD_CHARS] + f"\n… {len(e.text) - FOLD_CHARS:,} more characters (entry {i}; --full shows all)"
        border = "red" if e.is_error else _BORDER.get(e.kind, "white")
        parts.append(Panel(_t(text), title=_t(title), title_align="left", border_style=border))
    v, command = recorded_verifier(rec)
    if command:
        verifier = f"command: {command}\n" + "".join(f"  {k}={val}\n" for k, val in v["env"].items())
    elif row.service == "toolcall":
        verifier = "command: none (a toolcall trial's cases are checked one by one)\n"
    else:
        verifier = "command: not recorded (no verifier ran, or a record older than the field)\n"
    verifier += f"exit code {v.get('exit_code')}{' (timed out)' if v.get('timed_out') else ''}\n"
    verifier += f"stdout:\n{v.get('stdout', '')}\nstderr:\n{v.get('stderr', '')}"
    parts.append(Panel(_t(verifier), title="verifier", title_align="left"))
    if log:
        parts.append(Panel(_t(log), title="trial.log", title_align="left"))
    return Group(*parts)
