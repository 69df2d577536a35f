"""Issue 42 item 4: report.html rendered in headless Chromium (a real browser):
no horizontal overflow at 1400 px, every image loads, no figure without one.

Reports: the quick preset's (tests/fixtures/sweep-quick-vmstat) and a kept gem5
finding's (findings/2026-11-26-finding-b192/frames). Skips, with the reason,
when no chromium is installed (Debian: apt-get install chromium). By hand:
python3 -m analysis.results.browser_check DIR/report.html --screenshot shot.png
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.results.browser_check import Result, check, find_chromium
from analysis.results.report import write_report, write_report_from_frames

ROOT = Path(__file__).resolve().parents[2]
BROWSER = find_chromium()
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no chromium on PATH (apt-get install chromium, or set $CHROMIUM)"
)


@needs_browser
@pytest.mark.parametrize("which", ["quick", "gem5-finding"])
def test_report_renders_without_overflow_and_with_every_image(which: str, tmp_path: Path) -> None:
    if which == "quick":
        page = write_report([ROOT / "tests/fixtures/sweep-quick-vmstat"], tmp_path)["html"]
    else:
        frames = ROOT / "findings/2026-11-26-finding-b192/frames"
        page = write_report_from_frames(frames, tmp_path)["html"]
    shot = tmp_path / "shot.png"
    res = check(page, 1400, shot)
    assert res.viewport == 1400
    assert res.problems() == []
    assert res.images >= 4 and "Fig. 11 view as a forest plot" in page.read_text()
    assert shot.stat().st_size > 10_000  # a page was drawn


@needs_browser
def test_the_check_sees_an_overflowing_table_and_a_broken_image(tmp_path: Path) -> None:
    # the failure it must find: a table wider than the page, an image that does not load
    cells = "".join(f"<td>{'x' * 40}{i}</td>" for i in range(60))
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><table><tr>" + cells + "</tr></table>"
        "<figure><img alt='gone' src='data:image/png;base64,AAAA'></figure>"
        "<figure><figcaption>no image</figcaption></figure></body></html>"
    )
    res = check(page, 1400)
    probs = res.problems()
    assert any("scrolls sideways" in p for p in probs)
    assert any(p.startswith("past the right edge: TABLE") for p in probs)
    assert "image does not load: gone" in probs
    assert "1 figure(s) without an image" in probs


def test_problems_are_named() -> None:
    ok = Result(viewport=1400, scroll_width=1400, height=900, images=2)
    assert ok.problems() == []
    bad = Result(1400, 2631, 900, 2, broken=["fig13"], wide=["TABLE 2631px: x"], empty_figures=1)
    assert bad.problems() == [
        "the page scrolls sideways: 2631 px in 1400 px",
        "past the right edge: TABLE 2631px: x",
        "image does not load: fig13",
        "1 figure(s) without an image",
    ]
