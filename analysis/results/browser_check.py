"""report.html in a real browser: headless Chromium renders a copy of the page
at a given width and reports what a reader would see go wrong.

    python3 -m analysis.results.browser_check results/quick/report.html \\
        [--width 1400] [--screenshot shot.png]

Checks (exit 1 if any fails, 2 without a browser): the page does not scroll
sideways (documentElement.scrollWidth <= the viewport), no table, figure,
image or paragraph reaches past the viewport's right edge, every image
loads (complete, naturalWidth > 0), and every figure holds an image. The
copy gets a script that measures after the load event and writes the result
as JSON into the DOM, which ``--dump-dom`` prints; the report itself carries
no script. ``--screenshot`` also saves the whole page as PNG (its height
from the measured page, at most 16384 px) to look at.

The browser: $CHROMIUM, else chromium, chromium-browser, google-chrome on
PATH (Debian: apt-get install chromium).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PROBE = """<script>
window.addEventListener('load', function () {
  var w = window.innerWidth, de = document.documentElement;
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                   .map(function (i) { return (i.alt || i.src).slice(0, 80); });
  var sel = 'table,figure,img,p,h1,h2,pre';
  var wide = Array.prototype.slice.call(document.querySelectorAll(sel))
    .filter(function (e) { return e.getBoundingClientRect().right > w + 0.5; })
    .map(function (e) {
      var r = e.getBoundingClientRect();
      return e.tagName + ' ' + Math.round(r.right) + 'px: ' +
             (e.alt || e.textContent || '').trim().slice(0, 60);
    });
  var empty = Array.prototype.slice.call(document.querySelectorAll('figure'))
    .filter(function (f) { return !f.querySelector('img'); }).length;
  var out = {viewport: w, scroll_width: de.scrollWidth, height: de.scrollHeight,
             images: imgs.length, broken: broken, wide: wide, empty_figures: empty};
  var pre = document.createElement('pre');
  pre.id = 'numa-lb-browser-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""
RESULT = re.compile(r'<pre id="numa-lb-browser-check">(.*?)</pre>', re.S)
MAX_SHOT_PX = 16384


class BrowserError(RuntimeError):
    """No browser, or it did not render the page."""


@dataclass
class Result:
    viewport: int
    scroll_width: int
    height: int
    images: int
    broken: list[str] = field(default_factory=list)
    wide: list[str] = field(default_factory=list)
    empty_figures: int = 0

    def problems(self) -> list[str]:
        out = []
        if self.scroll_width > self.viewport:
            out.append(f"the page scrolls sideways: {self.scroll_width} px in {self.viewport} px")
        out += [f"past the right edge: {w}" for w in self.wide]
        out += [f"image does not load: {b}" for b in self.broken]
        if self.empty_figures:
            out.append(f"{self.empty_figures} figure(s) without an image")
        return out


def find_chromium() -> str | None:
    """The browser to use: $CHROMIUM, else the first of the usual names on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        return shutil.which(env) or (env if Path(env).is_file() else None)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if (p := shutil.which(name)) is not None:
            return p
    return None


def _run(browser: str, args: list[str], timeout: float) -> str:
    with tempfile.TemporaryDirectory(prefix="numa-lb-chromium-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
               *args]  # fmt: skip
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BrowserError(f"{browser}: {e}") from e
        if p.returncode != 0:
            raise BrowserError(f"{browser} exited {p.returncode}: {p.stderr.strip()[-500:]}")
        return p.stdout


def check(
    page: Path,
    width: int = 1400,
    screenshot: Path | None = None,
    browser: str | None = None,
    timeout: float = 120.0,
) -> Result:
    """Render a probed copy of @page (its images are inline data: URIs, so the
    copy is the page) at @width px and measure it; BrowserError without a
    browser or when it fails."""
    browser = browser or find_chromium()
    if browser is None:
        raise BrowserError("no chromium on PATH (apt-get install chromium, or set $CHROMIUM)")
    text = Path(page).read_text()
    with tempfile.TemporaryDirectory(prefix="numa-lb-check-") as tmp:
        probed = Path(tmp) / "page.html"
        at = text.rfind("</body>")
        probed.write_text(text[:at] + PROBE + text[at:] if at >= 0 else text + PROBE)
        url = probed.resolve().as_uri()
        dom = _run(
            browser,
            [f"--window-size={width},1000", "--virtual-time-budget=10000", "--dump-dom", url],
            timeout,
        )
        m = RESULT.search(dom)
        if m is None:
            raise BrowserError(f"{browser} rendered no measurement (the load event never came)")
        res = Result(**json.loads(html.unescape(m.group(1))))
        if screenshot is not None:
            h = max(600, min(MAX_SHOT_PX, int(res.height) + 40))
            shot = f"--screenshot={Path(screenshot).resolve()}"
            args = [f"--window-size={width},{h}", "--virtual-time-budget=10000", shot,
                    Path(page).resolve().as_uri()]  # fmt: skip
            _run(browser, args, timeout)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", type=Path, help="report.html")
    ap.add_argument("--width", type=int, default=1400, help="viewport width in px (1400)")
    ap.add_argument("--screenshot", type=Path, help="also save the whole page as this PNG")
    a = ap.parse_args(argv)
    try:
        res = check(a.page, a.width, a.screenshot)
    except BrowserError as e:
        print(f"browser check not run: {e}")
        return 2
    problems = res.problems()
    print(f"{a.page}: {res.images} images, page {res.scroll_width} px wide in a "
          f"{res.viewport} px viewport, {res.height} px tall")  # fmt: skip
    for p in problems:
        print(f"  PROBLEM {p}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
