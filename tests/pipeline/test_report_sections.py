"""report.html's sections for acting on the audit without the raw files: the planned moves
(topic, from, to, why), the twenty largest backlogs by subscription name, the retention plan
per namespace; and a dense page (sections side by side). Rendered from small data, no Spark."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from metaplane.pipeline._report import LARGEST_BACKLOGS, BrokerBars, ReportData, render_report


def report(**more: object) -> ReportData:
    fields: dict[str, object] = {
        "snapshot": {"revision": 42, "taken_at": 1768728611, "source": "test"},
        "counts": {"keys": 100},
        "brokers": [BrokerBars("1", "active", 3, 2), BrokerBars("2", "active", 1, 2)],
        "balance_before": {"cv": 0.5},
        "balance_after": {"cv": 0.0},
        "threshold": 0.1,
        "moves": 1,
        "backlog": [(2, 3)],
        "storage": [("orders", 7164, 2)],
        "findings": [],
        "severities": {},
        **more,
    }
    return ReportData(**fields)  # type: ignore[arg-type]


class Tables(HTMLParser):
    """The text of each table's cells, by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: str | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.current = dict(attrs).get("id") or "?"
            self.tables[self.current] = []
        elif tag == "tr" and self.current is not None:
            self.tables[self.current].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.current is not None:
            self.tables[self.current][-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def tables_of(page: str) -> dict[str, list[list[str]]]:
    parser = Tables()
    parser.feed(page)
    return parser.tables


def test_the_planned_moves_are_listed_with_why() -> None:
    moves = [
        {"topic": "/orders/paid", "from": "13308604176970018988", "to": "2", "reason": "drain"},
        {"topic": "/orders/<b>", "from": "1", "to": "2", "reason": "balance"},
    ]
    page = render_report(report(planned_moves=moves, moves=2))
    rows = tables_of(page)["moves-table"]
    assert rows[0] == ["topic", "from", "to", "why"]
    assert rows[1] == ["/orders/paid", "13308604176970018988", "2", "drain"]
    assert rows[2][0] == "/orders/<b>"  # escaped, shown as text
    assert "1 balance, 1 drain" in page
    quiet = render_report(report())
    assert "Nothing to move" in quiet and "moves-table" not in quiet


def test_the_twenty_largest_backlogs_name_their_subscriptions() -> None:
    largest = [
        {"namespace": "orders", "topic": f"t{i}", "subscription": f"sub-{i}", "cursor": i,
         "backlog": 1000 - i}
        for i in range(LARGEST_BACKLOGS + 5)
    ]  # fmt: skip
    rows = tables_of(render_report(report(largest_backlogs=largest)))["backlogs-table"]
    assert rows[0] == ["topic", "subscription", "cursor", "backlog"]
    assert len(rows) == 1 + LARGEST_BACKLOGS
    assert rows[1] == ["/orders/t0", "sub-0", "0", "1,000"]
    assert [row[1] for row in rows[1:]] == [f"sub-{i}" for i in range(LARGEST_BACKLOGS)]


def test_the_retention_plan_per_namespace() -> None:
    retention = {
        "objects": 5,
        "bytes": 3 * 1024 * 1024,
        "namespaces": {
            "logs": {"objects": 4, "bytes": 2 * 1024 * 1024},
            "orders": {"objects": 1, "bytes": 1024 * 1024},
        },
    }
    page = render_report(report(retention=retention))
    rows = tables_of(page)["retention-table"]
    assert rows == [
        ["namespace", "objects", "bytes"],
        ["logs", "4", "2.0 MiB"],
        ["orders", "1", "1.0 MiB"],
    ]
    assert "5 objects past their retention, 3.0 MiB" in page
    assert "No object to clean up" in render_report(report())


def test_the_page_is_dense_and_asks_for_nothing_outside_itself() -> None:
    page = render_report(report())
    assert "grid-template-columns" in page  # sections side by side, not one long column
    assert len(re.findall(r"<section", page)) == 7
    assert "default-src 'none'" in page
    assert not re.search(r"\b(src|href)\s*=", page)
