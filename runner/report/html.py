"""``mcpfleet report``: one self-contained HTML page (inline SVG, no scripts, no network) over one or more runs.

The page is the runs' summaries (load.py), a leaderboard when there are several, and the plots (plots.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpfleet.runner.report.load import ReportError, RunData, load_runs, output_inside_run
from mcpfleet.runner.report.markup import attrs, esc, fmt, num, pct, usd
from mcpfleet.runner.report.plots import (
    Series,
    build_series,
    plot_cost,
    plot_failures,
    plot_pass_at_1,
    plot_pass_at_k,
    plot_turns,
)
from mcpfleet.runner.results.records import now_iso, service_label

# ------------------------------------------------------------------------------------------------ tables


def run_header(run: RunData) -> str:
    s = run.summary
    planned = s.get("trials_planned")
    status = "complete" if s.get("complete") else "partial"
    dl = [
        ("run", s["run"]),
        ("location", run.location),
        ("spec hash", s.get("spec_hash")),
        ("trials", f"{s.get('trials_recorded')} recorded / {'?' if planned is None else planned} planned ({status})"),
        ("generated", s.get("generated_at")),
        ("aggregates", "summary.json" if run.source == "summary.json" else "recomputed from the trial records"),
    ]
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in dl)
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in run.notes)
    rows = []
    for r in s["rows"]:
        fails = ", ".join(f"{c} {n}" for c, n in r["failures"].items()) or "-"
        skipped = ", ".join(f"{c} {n}" for c, n in (r.get("not_scored") or {}).items()) or "-"
        std = r["pass_at_1_std"]
        rows.append(
            f"<tr{attrs(data_model=r['model'], data_service=r['service'], data_pass_at_1=num(r['pass_at_1']))}>"
            f'<td>{esc(r["model"])}</td><td>{esc(service_label(r))}</td><td class="n">{esc(r["trials"])}</td>'
            f'<td class="n">{pct(r["pass_at_1"])}{esc(f" ± {100 * std:.1f}") if std else ""}</td>'
            f'<td class="n">{pct(r["pass_at_k"])}</td><td class="n">{pct(r["pass_hat_k"])}</td>'
            f'<td class="n">{esc(r["attempts"])}</td><td class="n">{fmt(r["avg_turns"])}</td>'
            f'<td class="n">{fmt(r["avg_tool_calls"])}</td><td class="n">{fmt(r["avg_tokens"], "{:,.0f}")}</td>'
            f'<td class="n">{esc(usd(r["cost_usd"]))}</td><td>{esc(fails)}</td>'
            f'<td class="not-scored">{esc(skipped)}</td></tr>'
        )
    table = (
        '<table class="summary"><thead><tr><th>model</th><th>service</th><th>trials</th><th>pass@1</th>'
        "<th>pass@k</th><th>pass^k</th><th>k</th><th>turns</th><th>tool calls</th><th>tokens</th>"
        f"<th>cost</th><th>failures</th><th>not scored</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    stopped = "".join(
        f'<p class="note stopped" data-model="{esc(m)}">model {esc(m)} stopped: {esc(why)}</p>'
        for m, why in sorted((s.get("stopped") or {}).items())
    )
    notes += stopped
    data = attrs(
        data_run=run.label,
        data_run_index=run.index,
        data_spec_hash=s.get("spec_hash"),
        data_trials_recorded=s.get("trials_recorded"),
        data_trials_planned=num(planned),
        data_complete=num(bool(s.get("complete"))),
        data_source=run.source,
    )
    return (
        f'<section class="run" id="run-{run.index}"{data}>'
        f"<h2>{esc(run.label)}</h2><dl>{body}</dl>{notes}{table}{variants_table(run)}{call_class_table(s['rows'])}"
        f"{toolcall_table(s.get('toolcall') or {})}</section>"
    )


def variants_table(run: RunData) -> str:
    """Server variants against their baseline on paired trials (report/compare.py): summary.json's, or computed
    from the records when the summary has none (an older or recomputed one)."""
    from mcpfleet.runner.report.compare import compare_all

    comparisons = run.summary.get("comparisons")
    if not isinstance(comparisons, list):
        comparisons = compare_all(run.records)
    rows = []
    for c in comparisons:
        try:
            low, high = c["ci95"]
            diff = f"{100 * c['difference']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
            p_value, tokens = f"{c['mcnemar_p']:.3f}", f"{c['delta_tokens']:+,.0f}"
            up, down = ", ".join(c["flipped_up"]) or "-", ", ".join(c["flipped_down"]) or "-"
            rows.append(
                f"<tr{attrs(data_model=c['model'], data_variant=c['variant'], data_difference=num(c['difference']))}>"
                f"<td>{esc(c['model'])}</td><td>{esc(c['service'])}</td><td>{esc(c['baseline'])}</td>"
                f'<td>{esc(c["variant"])}</td><td class="n">{esc(c["pairs"])}</td>'
                f'<td class="n">{pct(c["baseline_pass_at_1"])}</td><td class="n">{pct(c["variant_pass_at_1"])}</td>'
                f'<td class="n">{esc(diff)}</td><td class="n">{esc(p_value)}</td>'
                f'<td>{esc(up)}</td><td>{esc(down)}</td><td class="n">{esc(tokens)}</td></tr>'
            )
        except (KeyError, TypeError, ValueError):  # a hand-edited summary.json: its comparison is left out
            continue
    if not rows:
        return ""
    return (
        "<h3>Server variants against their baseline (paired trials; pass@1 difference in points, 95% paired "
        'bootstrap interval over tasks, McNemar\'s exact p)</h3><table class="summary variants"><thead><tr>'
        "<th>model</th><th>service</th><th>baseline</th><th>variant</th><th>pairs</th><th>baseline pass@1</th>"
        "<th>variant pass@1</th><th>difference</th><th>p</th><th>better on</th><th>worse on</th><th>Δ tokens</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def call_class_table(rows: list[dict[str, Any]]) -> str:
    """The agents' tool calls per model x service by class (checker, or judge where one was named): shares."""
    from mcpfleet.runner.toolcalls.models import CALL_CLASSES

    seen = [r for r in rows if r.get("call_classes")]
    if not seen:
        return ""
    present = {c for r in seen for c in r["call_classes"]}
    classes = [c for c in CALL_CLASSES if c in present] + sorted(present - set(CALL_CLASSES))
    body = []
    for r in seen:
        total = sum(r["call_classes"].values())
        cells = "".join(
            f'<td class="n"{attrs(data_class=c, data_calls=r["call_classes"].get(c, 0))}>'
            f"{pct(r['call_classes'].get(c, 0) / total)}</td>"
            for c in classes
        )
        body.append(
            f"<tr{attrs(data_model=r['model'], data_service=r['service'])}><td>{esc(r['model'])}</td>"
            f'<td>{esc(r["service"])}</td><td class="n">{total}</td>{cells}</tr>'
        )
    head = "".join(f"<th>{esc(c)}</th>" for c in classes)
    return (
        '<h3>Tool calls by class</h3><table class="summary call-classes"><thead><tr><th>model</th><th>service</th>'
        f"<th>calls</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def toolcall_table(by_model: dict[str, Any]) -> str:
    """Toolcall cases per model and gold label (passes, pass rate), and the checker's classes of the calls."""
    if not by_model:
        return ""
    rows = []
    for model, m in sorted(by_model.items()):
        classes = ", ".join(f"{c} {n}" for c, n in (m.get("call_classes") or {}).items()) or "-"
        for label, g in (m.get("by_label") or {}).items():
            rows.append(
                f"<tr{attrs(data_model=model, data_label=label, data_passed=g['passed'], data_cases=g['cases'])}>"
                f'<td>{esc(model)}</td><td>{esc(label)}</td><td class="n">{esc(g["cases"])}</td>'
                f'<td class="n">{esc(g["passed"])}</td><td class="n">{pct(g.get("pass_rate"))}</td>'
                f"<td>{esc(classes)}</td></tr>"
            )
    return (
        '<h3>Tool calls by gold label</h3><table class="summary toolcall"><thead><tr><th>model</th><th>label</th>'
        "<th>cases</th><th>passed</th><th>pass rate</th><th>classes of the calls (checker)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def leaderboard_rows(series: list[Series]) -> list[Series]:
    return sorted(
        series, key=lambda s: (-(s.overall["pass_at_1"] or 0.0), -(s.overall["pass_at_k"] or 0.0), s.run.index, s.model)
    )


def leaderboard(series: list[Series]) -> str:
    rows = []
    for rank, s in enumerate(leaderboard_rows(series), 1):
        o = s.overall
        k, std = o["attempts"], o["pass_at_1_std"]
        data = attrs(
            **s.keys(),
            data_rank=rank,
            data_pass_at_1=num(o["pass_at_1"]),
            data_std=num(std),
            data_pass_at_k=num(o["pass_at_k"]),
            data_pass_hat_k=num(o["pass_hat_k"]),
            data_k=k,
            data_cost_usd=num(o.get("cost_usd")),
            data_avg_turns=num(o.get("avg_turns")),
        )
        rows.append(
            f"<tr{data}>"
            f'<td class="n">{rank}</td><td>{esc(s.run.label)}</td><td>{esc(s.model)}</td>'
            f'<td class="n">{pct(o["pass_at_1"])}{esc(f" ± {100 * std:.1f}") if std else ""}</td>'
            f'<td class="n">{pct(o["pass_at_k"])} <span class="k">(k={k})</span></td>'
            f'<td class="n">{pct(o["pass_hat_k"])}</td><td class="n">{esc(usd(o.get("cost_usd")))}</td>'
            f'<td class="n">{fmt(o.get("avg_turns"))}</td><td class="n">{esc(o["trials"])}</td></tr>'
        )
    return (
        '<section id="leaderboard-section"><h2>Leaderboard</h2><table id="leaderboard" class="summary">'
        "<thead><tr><th>#</th><th>run</th><th>model</th><th>pass@1 ± std</th><th>pass@k</th><th>pass^k</th>"
        f"<th>cost (total)</th><th>turns (avg)</th><th>trials</th></tr></thead><tbody>{''.join(rows)}</tbody>"
        '</table><p class="note">One row per run and model (over all its services), by pass@1.</p></section>'
    )


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;margin:24px auto;
max-width:960px;padding:0 16px;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:24px 0 8px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 8px}dt{color:#666}dd{margin:0}
table.summary{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}
table.summary th,table.summary td{border-bottom:1px solid #e4e4e4;padding:3px 6px;text-align:left}
table.summary td.n{text-align:right;font-variant-numeric:tabular-nums}.k{color:#777}
figure.plot{margin:28px 0;padding:0}figure.plot svg{max-width:100%;height:auto;display:block}
figcaption{color:#444;font-size:13px;margin-top:4px}.note{color:#8a5a00;font-size:13px;margin:4px 0}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;fill:#222}
svg .tick{fill:#555;font-size:11px}svg .axis-label{font-size:12px;fill:#333}svg .series-label{font-weight:600}
svg .row-label,svg .value{fill:#444;font-size:11px}svg .note-text{fill:#8a5a00;font-size:11px}
svg .grid{stroke:#eee}svg .axis-line{stroke:#888}svg .errorbar{stroke:#222;stroke-width:1.5;fill:none}
svg .stem{stroke:#999;stroke-width:2}
svg .pass-at-k{fill:#4e79a7}svg .pass-hat-k{fill:#fff;stroke:#e15759;stroke-width:2}
svg .p1-tick{stroke:#333;stroke-width:2}svg .box{fill:#f3f3f3;stroke:#bbb}svg .median{stroke:#222;stroke-width:2}
svg .trial{fill-opacity:.75}svg .cost-unknown{stroke-width:2;stroke-dasharray:3 2}
"""


def render_html(runs: list[RunData], title: str | None = None) -> str:
    series = build_series(runs)
    title = title or ("mcpfleet report: " + ", ".join(r.label for r in runs))
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">{len(runs)} run(s), {len(series)} model result(s); generated {esc(now_iso())} '
        "by mcpfleet report.</p>",
    ]
    if len(runs) > 1:
        body.append(leaderboard(series))
    body += [run_header(r) for r in runs]
    if series:
        body.append('<section id="plots"><h2>Plots</h2>')
        body += [
            plot_pass_at_1(series),
            plot_pass_at_k(series),
            plot_cost(series),
            plot_turns(series),
            plot_failures(series),
        ]
        body.append("</section>")
    else:
        body.append('<p class="note">No trial recorded yet: nothing to plot.</p>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_report(
    refs: list[str], output: Path, endpoint_url: str | None = None, region: str | None = None, title: str | None = None
) -> list[RunData]:
    """Read the runs, write the HTML report; returns the runs (their summaries for the terminal tables)."""
    if output.is_dir():
        raise ReportError(f"--output {output}: is a folder; name the HTML file to write, e.g. {output / 'report.html'}")
    if not output.parent.is_dir():
        raise ReportError(f"--output {output}: no folder {output.parent}; create it, or write the report elsewhere")
    if (root := output_inside_run(output, refs)) is not None:
        raise ReportError(
            f"--output {output}: inside the run folder {root}, whose records it could replace; "
            f"write the report outside it, e.g. -o {root.parent / 'report.html'}"
        )
    runs = load_runs(refs, endpoint_url, region)
    html = render_html(runs, title)
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ReportError(f"--output {output}: cannot be written ({exc.strerror or exc}); choose another") from None
    return runs
