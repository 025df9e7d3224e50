"""judge-eval output: rich tables for the terminal and one self-contained HTML page (no scripts, no network)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from mcpfleet.runner._util.plural import plural

HTML_DISAGREEMENTS = 500  # the page lists this many; the JSON report has all of them

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;margin:24px auto;
max-width:1100px;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:24px 0 8px}h3{font-size:15px;margin:16px 0 6px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 8px}dt{color:#666}dd{margin:0}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 6px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}td.hit{font-weight:600}
table.confusion td.n{min-width:48px}.grid{display:flex;flex-wrap:wrap;gap:24px}figure{margin:0}
code{font-size:12px;word-break:break-all}.note{color:#8a5a00;font-size:13px}.wrong{color:#b00020}
"""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


# ------------------------------------------------------------------------------------------------ terminal


def text_report(result: dict[str, Any], show: int = 10) -> Group:
    systems = result["systems"]
    summary = Table(title=f"judge-eval: {plural(result['data']['cases'], 'case')}")
    for col in ("system", "n", "accuracy", "macro F1"):
        summary.add_column(col, justify="left" if col == "system" else "right")
    for name, m in systems.items():
        summary.add_row(name, str(m["n"]), _pct(m["accuracy"]), _num(m["macro_f1"]))
    per_class = Table(title="per class: precision / recall / F1 (support)")
    per_class.add_column("class")
    for name in systems:
        per_class.add_column(name, justify="right")
    labels = list(next(iter(systems.values()))["per_class"]) if systems else []
    for label in labels:
        cells = []
        for m in systems.values():
            c = m["per_class"][label]
            cells.append(f"{_num(c['precision'])} / {_num(c['recall'])} / {_num(c['f1'])} ({c['support']})")
        per_class.add_row(label, *cells)
    parts: list[Any] = [summary]
    judge = result.get("judge")
    if judge:
        st = judge["stats"]
        parts.append(
            Text(
                f"judge {judge['model']} (rubric {judge['rubric_version']}, {judge['judged']}): "
                f"{st['requests']} requests, "
                f"{st['cache_hits']} cache hits, {st['malformed']} malformed answers retried, {st['failed']} failed"
            )
        )
    parts.append(per_class)
    for name, m in systems.items():
        conf = m["confusion"]
        t = Table(title=f"confusion: {name} (rows gold, columns predicted)")
        t.add_column("gold \\ predicted")
        for col in conf["columns"]:
            t.add_column(col.replace("incorrect_", "inc_"), justify="right")
        for row, values in zip(conf["rows"], conf["matrix"], strict=True):
            t.add_row(row, *(str(v) for v in values))
        parts.append(t)
    rows = result["disagreements"]
    if rows:
        d = Table(title=f"disagreements with the labels: {len(rows)} (first {min(show, len(rows))})")
        for col in ("id", "gold", *systems, "mutation", "why (checker / judge)", "label's reason"):
            d.add_column(col, overflow="fold")
        for r in rows[:show]:
            why = "; ".join(r["checker_reasons"][:2]) or r.get("judge_reasoning", "")
            row = (
                r["id"],
                r["gold"],
                *(r["predicted"][s] for s in systems),
                r["mutation"] or "",
                why[:160],
                (r["failure_reason"] or "")[:160],
            )
            d.add_row(*(Text(str(c)) for c in row))  # data, never markup: "[/x]" in a reason is text
        parts.append(d)
    return Group(*parts)


# ------------------------------------------------------------------------------------------------ HTML


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _td(text: str, cls: str = "", title: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' title="{escape(title)}"' if title else "")
    return f"<td{attrs}>{escape(text)}</td>"


def _confusion(name: str, m: dict[str, Any]) -> str:
    conf = m["confusion"]
    rows = []
    for gold, values in zip(conf["rows"], conf["matrix"], strict=True):
        total = sum(values) or 1
        cells = [_td(gold)]
        for col, v in zip(conf["columns"], values, strict=True):
            shade = int(255 - 150 * v / total)
            color = f"rgb({shade},{shade},255)" if col == gold else f"rgb(255,{shade},{shade})"
            cells.append(
                f'<td class="n{" hit" if col == gold else ""}" style="background:{color if v else "#fff"}" '
                f'data-gold="{escape(gold)}" data-predicted="{escape(col)}">{v}</td>'
            )
        rows.append(cells)
    table = _table(["gold \\ predicted", *conf["columns"]], rows, "confusion")
    return f'<figure id="confusion-{escape(name.replace("+", "-"))}"><h3>{escape(name)}</h3>{table}</figure>'


def html_report(result: dict[str, Any], title: str = "mcpfleet judge-eval") -> str:
    systems = result["systems"]
    data, judge = result["data"], result.get("judge")
    meta = [
        ("data", data["path"] or ", ".join(data["files"])),
        ("cases", f"{data['cases']} of {data['rows']} rows ({len(data['skipped'])} bad rows skipped)"),
        ("generated", result["generated_at"]),
        (
            "checker",
            f"{result['checker_schema_valid']} calls schema-valid, {result['checker_missed_wrong']} of them "
            "labelled wrong (off-intent values or a wrong but valid tool: a schema cannot see them)",
        ),
    ]
    if judge:
        stats = judge["stats"]
        meta += [
            ("judge", f"{judge['model']} (rubric {judge['rubric_version']}; {judge['judged']})"),
            (
                "judge calls",
                f"{stats['requests']} requests, {stats['cache_hits']} cache hits, {stats['malformed']} "
                f"malformed answers retried, {stats['failed']} cases without a valid answer",
            ),
        ]
    body = [
        f"<h1>{escape(title)}</h1>",
        "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in meta) + "</dl>",
    ]
    body.append('<section id="summary"><h2>Summary</h2>')
    body.append(
        _table(
            ["system", "n", "accuracy", "macro F1"],
            [
                [_td(s), _td(str(m["n"]), "n"), _td(_pct(m["accuracy"]), "n"), _td(_num(m["macro_f1"]), "n")]
                for s, m in systems.items()
            ],
        )
    )
    head = ["class"] + [f"{s} {k}" for s in systems for k in ("P", "R", "F1")] + ["support"]
    rows = []
    for label in next(iter(systems.values()))["per_class"] if systems else []:
        cells = [_td(label)]
        for m in systems.values():
            c = m["per_class"][label]
            cells += [_td(_num(c["precision"]), "n"), _td(_num(c["recall"]), "n"), _td(_num(c["f1"]), "n")]
        support = next(iter(systems.values()))["per_class"][label]["support"]
        rows.append([*cells, _td(str(support), "n")])
    body.append("<h3>Per class</h3>" + _table(head, rows, "per-class") + "</section>")
    body.append('<section id="confusion"><h2>Confusion matrices</h2><div class="grid">')
    body += [_confusion(s, m) for s, m in systems.items()]
    body.append("</div></section>")
    if result.get("by_mutation"):
        names = list(systems)
        rows = [
            [_td(mut), _td(str(g["n"]), "n"), *(_td(_pct(g[s]), "n") for s in names)]
            for mut, g in result["by_mutation"].items()
        ]
        body.append('<section id="by-mutation"><h2>Accuracy by kind of mistake</h2>')
        body.append(_table(["mutation", "n", *names], rows) + "</section>")
    dis = result["disagreements"]
    body.append(f'<section id="disagreements"><h2>Disagreements with the labels ({len(dis)})</h2>')
    if len(dis) > HTML_DISAGREEMENTS:
        body.append(f'<p class="note">The first {HTML_DISAGREEMENTS} are shown; the JSON report lists all.</p>')
    rows = []
    for r in dis[:HTML_DISAGREEMENTS]:
        preds = [_td(r["predicted"][s], "" if r["predicted"][s] == r["gold"] else "wrong") for s in systems]
        call = json.dumps(r["call"], ensure_ascii=False)
        why = "; ".join(r["checker_reasons"]) or r.get("judge_reasoning", "")
        rows.append(
            [
                _td(r["id"]),
                _td(r["gold"]),
                *preds,
                _td(r["mutation"] or ""),
                f"<td><code>{escape(call)}</code></td>",
                _td(why),
                _td(r["failure_reason"] or ""),
            ]
        )
    body.append(_table(["id", "gold", *systems, "mutation", "call", "why (checker / judge)", "label's reason"], rows))
    body.append("</section>")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )
