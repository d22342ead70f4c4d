"""report.html opens in headless Chromium with no network at all and shows its charts: the
SVG charts are in the DOM after its script ran, and the screenshot is not blank."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from metaplane.pipeline import REPORT
from tests.pipeline.conftest import FaultsAnalysis

CHARTS = ("load-chart", "backlog-chart", "storage-chart")


def chromium() -> list[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not on PATH: `make test` installs it (apt-get install chromium)")
    return [binary]


def run_chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    offline = [
        # Every name resolves to nothing and every connection goes to a closed port.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
    ]
    command = [
        *chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1000,800",
        *offline,
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


def test_the_page_asks_for_nothing_outside_itself(faults_analysis: FaultsAnalysis) -> None:
    page = (faults_analysis.out / REPORT).read_text()
    assert "default-src 'none'" in page
    assert not re.search(r"\b(src|href)\s*=", page)
    assert set(re.findall(r"https?://[^\s'\"<]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_chromium_shows_the_charts(faults_analysis: FaultsAnalysis, tmp_path: Path) -> None:
    uri = (faults_analysis.out / REPORT).resolve().as_uri()
    dom = run_chromium(tmp_path / "profile", "--dump-dom", uri)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert f'data-ready="{len(CHARTS)}"' in dom.stdout  # the script ran and found the charts
    for chart in CHARTS:
        svg = re.search(rf"<svg id=\"{chart}\".*?</svg>", dom.stdout, re.S)
        assert svg is not None, chart
        assert svg.group(0).count("<rect") >= 2, chart
    assert dom.stdout.count('<tr data-severity="') == len(
        faults_analysis.json("audit.json")["findings"]
    )
    shot = tmp_path / "report.png"
    taken = run_chromium(tmp_path / "profile", f"--screenshot={shot}", uri)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    colours = Counter(png_pixels(shot.read_bytes()))
    top_share = colours.most_common(1)[0][1] / sum(colours.values())
    assert len(colours) > 50 and top_share < 0.9  # text, bars and pills, not a blank page


def png_pixels(data: bytes) -> list[bytes]:
    """The pixels of an 8-bit RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, []
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    rows = _unfilter(zlib.decompress(b"".join(chunks)), width * channels, height, channels)
    return [row[i : i + channels] for row in rows for i in range(0, len(row), channels)]


def _unfilter(raw: bytes, stride: int, height: int, step: int) -> list[bytes]:
    rows: list[bytes] = []
    previous = bytearray(stride)
    for index in range(height):
        start = index * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - step] if x >= step else 0
            up = previous[x]
            corner = previous[x - step] if x >= step else 0
            line[x] = (line[x] + _predict(kind, left, up, corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return rows


def _predict(kind: int, left: int, up: int, corner: int) -> int:
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    guess = left + up - corner
    near = min(
        (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)
    )
    return near[2]
