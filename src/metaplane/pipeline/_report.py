"""report.html: one self-contained page (inline CSS, SVG and script, no network: its Content
Security Policy forbids every load), dense enough to act on without the raw files: the load
per broker before and after the plan, the planned moves (topic, from, to, why), the backlog
distribution and the twenty largest backlogs by subscription, storage and the retention plan
per namespace, and the audit findings.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Nothing may load: no script, style, font or image from anywhere but the page itself.
CONTENT_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)
MAX_BARS = 200
MAX_FINDINGS = 1000
MAX_MOVES = 200
LARGEST_BACKLOGS = 20
BEFORE, AFTER = "#8a9bb0", "#2f6fdf"
SEVERITY_COLORS = {"error": "#c62828", "warning": "#b26a00", "info": "#4a6785"}


@dataclass(frozen=True)
class BrokerBars:
    """A broker's topic count before and after the plan."""

    broker_id: str
    mode: str
    before: int
    after: int


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, collected by the job."""

    snapshot: dict[str, object]
    counts: dict[str, int]
    brokers: Sequence[BrokerBars]
    balance_before: dict[str, float | int]
    balance_after: dict[str, float | int]
    threshold: float
    moves: int
    backlog: Sequence[tuple[int, int]]  # (digits, subscriptions)
    storage: Sequence[tuple[str, int, int]]  # (namespace, bytes, objects)
    findings: Sequence[dict[str, object]]
    severities: dict[str, int]
    retention: dict[str, Any] = field(default_factory=dict)
    """The retention plan's totals: objects, bytes, and {"namespaces": {ns: {objects, bytes}}}."""
    planned_moves: Sequence[dict[str, Any]] = ()
    """The rebalance plan's moves: topic, from, to, reason."""
    largest_backlogs: Sequence[dict[str, Any]] = ()
    """The subscriptions furthest behind: namespace, topic, subscription, cursor, backlog."""


def render_report(data: ReportData) -> str:
    """The page, as one string."""
    sections = [
        _section(
            "Load per broker",
            "topics owned, before and after the rebalance plan",
            _load_chart(data),
        ),
        _section("Planned moves", _moves_line(data), _moves_table(data), "moves"),
        _section("Backlog", "subscriptions by unacknowledged messages", _backlog_chart(data)),
        _section(
            "Largest backlogs",
            f"the {LARGEST_BACKLOGS} subscriptions furthest behind",
            _backlogs_table(data),
            "largest-backlogs",
        ),
        _section("Storage per namespace", "bytes in tiered storage", _storage_chart(data)),
        _section("Retention plan", _retention_line(data), _retention_table(data), "retention"),
        _section("Audit findings", _severity_line(data), _findings(data), "findings-section", True),
    ]
    return _PAGE.format(
        policy=CONTENT_POLICY,
        style=_STYLE,
        body=_header(data) + "\n<main>" + "\n".join(sections) + "</main>",
        script=_SCRIPT,
        title=_title(data),
    )


def _title(data: ReportData) -> str:
    return html.escape(f"metaplane report — revision {data.snapshot.get('revision')}")


def _header(data: ReportData) -> str:
    taken = data.snapshot.get("taken_at")
    when = (
        datetime.datetime.fromtimestamp(float(taken), datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        if isinstance(taken, int | float)
        else "?"
    )
    facts = {
        "source": data.snapshot.get("source"),
        "revision": data.snapshot.get("revision"),
        "taken": when,
        **data.counts,
    }
    cells = "".join(
        f"<div class='fact'><b>{html.escape(str(value))}</b><span>{html.escape(name)}</span></div>"
        for name, value in facts.items()
    )
    return f"<header><h1>{_title(data)}</h1><div class='facts'>{cells}</div></header>"


def _section(title: str, subtitle: str, body: str, section_id: str = "", wide: bool = False) -> str:
    attributes = f" id='{section_id}'" if section_id else ""
    attributes += " class='wide'" if wide else ""
    return (
        f"<section{attributes}><h2>{html.escape(title)}</h2>"
        f"<p class='sub'>{html.escape(subtitle)}</p>{body}</section>"
    )


# Tables -------------------------------------------------------------------------------------


def _table(table_id: str, headings: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of already escaped cells; a heading ending in "#" is a number column."""
    head = "".join(
        f"<th class='num'>{html.escape(h[:-1])}</th>"
        if h.endswith("#")
        else f"<th>{html.escape(h)}</th>"
        for h in headings
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='num'>{cell}</td>" if heading.endswith("#") else f"<td>{cell}</td>"
            for heading, cell in zip(headings, row, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _moves_line(data: ReportData) -> str:
    reasons: dict[str, int] = {}
    for move in data.planned_moves:
        reasons[str(move.get("reason"))] = reasons.get(str(move.get("reason")), 0) + 1
    why = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"{data.moves} moves ({why}); rebalance-plan.json has them all" if why else "no move"


def _moves_table(data: ReportData) -> str:
    if not data.planned_moves:
        return "<p class='empty'>Nothing to move: the cluster is balanced.</p>"
    rows = [
        [
            html.escape(str(move.get("topic"))),
            html.escape(str(move.get("from"))),
            html.escape(str(move.get("to"))),
            html.escape(str(move.get("reason"))),
        ]
        for move in list(data.planned_moves)[:MAX_MOVES]
    ]
    more = len(data.planned_moves) - MAX_MOVES
    tail = f"<p class='sub'>{more} more moves in rebalance-plan.json.</p>" if more > 0 else ""
    return _table("moves-table", ["topic", "from", "to", "why"], rows) + tail


def _backlogs_table(data: ReportData) -> str:
    if not data.largest_backlogs:
        return "<p class='empty'>No subscription is behind.</p>"
    rows = [
        [
            html.escape(f"/{row.get('namespace')}/{row.get('topic')}"),
            html.escape(str(row.get("subscription"))),
            html.escape("—" if row.get("cursor") is None else str(row.get("cursor"))),
            f"{int(row.get('backlog') or 0):,}",
        ]
        for row in list(data.largest_backlogs)[:LARGEST_BACKLOGS]
    ]
    return _table("backlogs-table", ["topic", "subscription", "cursor", "backlog#"], rows)


def _retention_line(data: ReportData) -> str:
    objects, size = data.retention.get("objects", 0), data.retention.get("bytes", 0)
    if not objects:
        return "nothing past its retention"
    return (
        f"{objects:,} objects past their retention, {_bytes(size)}; retention-plan.json lists them"
    )


def _retention_table(data: ReportData) -> str:
    namespaces: dict[str, dict[str, int]] = data.retention.get("namespaces", {})
    if not namespaces:
        return "<p class='empty'>No object to clean up.</p>"
    rows = [
        [
            html.escape(name),
            f"{counts.get('objects', 0):,}",
            html.escape(_bytes(counts.get("bytes", 0))),
        ]
        for name, counts in sorted(namespaces.items(), key=lambda item: -item[1].get("bytes", 0))
    ]
    return _table("retention-table", ["namespace", "objects#", "bytes#"], rows)


# Charts -------------------------------------------------------------------------------------


def _load_chart(data: ReportData) -> str:
    bars = list(data.brokers)[:MAX_BARS]
    if not bars:
        return "<p class='empty'>No brokers.</p>"
    rows = [(f"{b.broker_id} ({b.mode})", [b.before, b.after]) for b in bars]
    chart = _hbars("load-chart", rows, [("before", BEFORE), ("after", AFTER)], str)
    before, after = data.balance_before, data.balance_after
    note = (
        f"coefficient of variation {before.get('cv')} → {after.get('cv')} "
        f"(threshold {data.threshold}); max/mean {before.get('max_over_mean')} → "
        f"{after.get('max_over_mean')}; {data.moves} moves"
    )
    more = len(data.brokers) - len(bars)
    tail = f"<p class='sub'>{more} more brokers not shown.</p>" if more > 0 else ""
    return f"<p class='note'>{html.escape(note)}</p>{chart}{tail}"


def _backlog_chart(data: ReportData) -> str:
    if not data.backlog:
        return "<p class='empty'>No subscription with a known backlog.</p>"
    labels = [(_magnitude(digits), count) for digits, count in data.backlog]
    return _vbars("backlog-chart", labels, AFTER)


def _magnitude(digits: int) -> str:
    if digits == 0:
        return "0"
    return f"{10 ** (digits - 1):,}–{10**digits - 1:,}"


def _storage_chart(data: ReportData) -> str:
    rows = sorted(data.storage, key=lambda row: -row[1])[:MAX_BARS]
    if not rows:
        return "<p class='empty'>No storage objects.</p>"
    bars = [(f"{name} ({objects:,} objects)", [size]) for name, size, objects in rows]
    return _hbars("storage-chart", bars, [("bytes", AFTER)], _bytes)


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"


def _hbars(
    chart_id: str,
    rows: Sequence[tuple[str, Sequence[int]]],
    series: Sequence[tuple[str, str]],
    label: Callable[[int], str],
) -> str:
    """Horizontal bars: one row per label, one bar per series."""
    bar, gap, left, width = 12, 8, 260, 460
    row_height = bar * len(series) + gap
    height = row_height * len(rows) + 30
    top = max((max(values) for _, values in rows), default=0) or 1
    parts = [_legend(series, left)]
    for index, (name, values) in enumerate(rows):
        y = 24 + index * row_height
        parts.append(
            f"<text class='label' x='{left - 6}' y='{y + bar}' text-anchor='end'>"
            f"{html.escape(name[:40])}</text>"
        )
        for number, (value, (series_name, color)) in enumerate(zip(values, series, strict=True)):
            length = max(value / top * width, 0.5)
            by = y + number * bar
            parts.append(
                f"<rect class='bar' x='{left}' y='{by}' width='{length:.1f}' height='{bar - 2}' "
                f"fill='{color}'><title>{html.escape(name)} {series_name}: {label(value)}"
                f"</title></rect><text class='value' x='{left + length + 4:.1f}' "
                f"y='{by + bar - 3}'>{html.escape(label(value))}</text>"
            )
    return _svg(chart_id, left + width + 90, height, parts)


def _vbars(chart_id: str, bars: Sequence[tuple[str, int]], color: str) -> str:
    """Vertical bars, one per label."""
    width, height, bottom, slot = 64, 220, 40, 72
    top = max(count for _, count in bars) or 1
    parts = []
    for index, (name, count) in enumerate(bars):
        x = 20 + index * slot
        length = max(count / top * (height - bottom - 20), 0.5)
        y = height - bottom - length
        parts.append(
            f"<rect class='bar' x='{x}' y='{y:.1f}' width='{width}' height='{length:.1f}' "
            f"fill='{color}'><title>{html.escape(name)}: {count:,} subscriptions</title></rect>"
            f"<text class='value' x='{x + width / 2}' y='{y - 4:.1f}' text-anchor='middle'>"
            f"{count:,}</text><text class='label' x='{x + width / 2}' y='{height - bottom + 16}' "
            f"text-anchor='middle'>{html.escape(name)}</text>"
        )
    return _svg(chart_id, 40 + len(bars) * slot, height, parts)


def _legend(series: Sequence[tuple[str, str]], left: int) -> str:
    items = []
    for index, (name, color) in enumerate(series):
        x = left + index * 90
        items.append(
            f"<rect x='{x}' y='4' width='12' height='12' fill='{color}'/>"
            f"<text class='label' x='{x + 16}' y='14'>{html.escape(name)}</text>"
        )
    return "".join(items)


def _svg(chart_id: str, width: float, height: float, parts: Sequence[str]) -> str:
    return (
        f"<svg id='{chart_id}' class='chart' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width:.0f}' height='{height:.0f}' viewBox='0 0 {width:.0f} {height:.0f}' "
        f"role='img'>{''.join(parts)}</svg>"
    )


# Findings -----------------------------------------------------------------------------------


def _severity_line(data: ReportData) -> str:
    counts = ", ".join(f"{count} {name}" for name, count in data.severities.items())
    return counts or "no findings"


def _findings(data: ReportData) -> str:
    if not data.findings:
        return "<p class='empty' id='no-findings'>No findings: the metadata is consistent.</p>"
    buttons = "".join(
        f"<button data-severity='{html.escape(name)}'>{html.escape(name)} ({count})</button>"
        for name, count in data.severities.items()
    )
    rows = "".join(_finding_row(finding) for finding in data.findings[:MAX_FINDINGS])
    more = len(data.findings) - MAX_FINDINGS
    tail = f"<p class='sub'>{more} more in audit.json.</p>" if more > 0 else ""
    return (
        f"<div class='filters'><button data-severity='all'>all</button>{buttons}</div>"
        "<table id='findings'><thead><tr><th>severity</th><th>check</th><th>finding</th>"
        f"<th>keys</th></tr></thead><tbody>{rows}</tbody></table>{tail}"
    )


def _finding_row(finding: dict[str, object]) -> str:
    severity = str(finding.get("severity"))
    keys = finding.get("keys") or []
    key_list = "<br>".join(html.escape(str(key)) for key in list(keys)[:5])  # type: ignore[call-overload]
    color = SEVERITY_COLORS.get(severity, "#555")
    return (
        f"<tr data-severity='{html.escape(severity)}'><td><span class='pill' "
        f"style='background:{color}'>{html.escape(severity)}</span></td>"
        f"<td>{html.escape(str(finding.get('check')))}</td>"
        f"<td>{html.escape(str(finding.get('message')))}</td><td class='keys'>{key_list}</td></tr>"
    )


_STYLE = """
body{font:13px/1.35 system-ui,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:12px 20px}
h1{font-size:18px;margin:0 0 8px}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:12px;
padding:12px 16px;align-items:start}
section.wide{grid-column:1/-1}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.facts{display:flex;flex-wrap:wrap;gap:10px}
.fact{background:#2b3345;border-radius:6px;padding:6px 12px;display:flex;flex-direction:column}
.fact b{font-size:16px}.fact span{font-size:11px;color:#aeb7c9}
section{background:#fff;padding:10px 14px;border-radius:8px;overflow:auto;max-height:640px;
box-shadow:0 1px 3px rgba(0,0,0,.08)}
h2{font-size:15px;margin:0}.sub,.note{color:#5b6475;margin:2px 0 8px}
.chart text{font-size:11px;fill:#333}.chart .value{fill:#555}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:3px 6px;
border-bottom:1px solid #e6e8ec;vertical-align:top}
.keys{font-family:ui-monospace,monospace;font-size:11px;color:#444}
.pill{color:#fff;border-radius:9px;padding:1px 8px;font-size:11px}
.filters button{margin:0 6px 10px 0;border:1px solid #c7ccd6;background:#fff;border-radius:5px;
padding:3px 10px;cursor:pointer}.filters button.on{background:#1d2330;color:#fff}
.empty{color:#2e7d32}
"""

# The only script: the severity filter of the findings table, and a mark that it ran.
_SCRIPT = """
(function () {
  var buttons = document.querySelectorAll('.filters button');
  function show(severity) {
    document.querySelectorAll('#findings tbody tr').forEach(function (row) {
      row.style.display = severity === 'all' || row.dataset.severity === severity ? '' : 'none';
    });
    buttons.forEach(function (b) { b.classList.toggle('on', b.dataset.severity === severity); });
  }
  buttons.forEach(function (b) {
    b.addEventListener('click', function () { show(b.dataset.severity); });
  });
  if (buttons.length) { show('all'); }
  document.body.setAttribute('data-ready', String(document.querySelectorAll('svg.chart').length));
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{style}</style></head>
<body>
{body}
<script>{script}</script>
</body></html>
"""
