"""Open a report page in headless Chromium as a reader would, and say what is broken.

``python -m sweeper.report.pagecheck docs/results/*/index.html`` renders each page in a
1440 px wide window and lists the images that did not load, the messages the page wrote
to the browser console, the figures wider than the page (the browser shrinks them, and
their text with them) and a page that scrolls sideways; it exits 1 when any page has
one. The report pages are static files, so a broken page means a figure the report
linked but did not write, or a file moved away from its page.

Chromium is Debian's package (``apt-get install chromium``); ``$CHROMIUM`` names another
binary. The page is copied beside itself (so its relative links resolve) with a script
that records, after the load event, which images decoded; ``--dump-dom`` returns it.

``check_ui`` opens an address of MLflow's UI the same way and says whether it showed the
runs table in the model-training view (sweeper/ui.py) or MLflow's GenAI chrome.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PROBE_ID = "sweeper-pagecheck"
PROBE = (
    "<script>window.addEventListener('load', () => {"
    "const out = document.createElement('pre');"
    f"out.id = '{PROBE_ID}';"
    "out.textContent = JSON.stringify({images: [...document.images].map("
    "i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0, i.naturalWidth,"
    " i.getBoundingClientRect().width]),"
    " overflow: document.documentElement.scrollWidth > window.innerWidth});"
    "document.body.appendChild(out);});</script>"
)
CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)")
TIMEOUT_S = 60
WINDOW = (1440, 900)
"""A laptop's browser window: the width a page must fit."""


class NoBrowserError(RuntimeError):
    """No Chromium to render the page with."""


@dataclass
class PageCheck:
    """What one page showed: its images (src, loaded) and its console messages."""

    page: Path
    images: list[tuple[str, bool]] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    wide: list[str] = field(default_factory=list)  # figures shrunk to fit: wider than the page
    overflow: bool = False  # the page scrolls sideways

    @property
    def broken(self) -> list[str]:
        return [src for src, loaded in self.images if not loaded]

    @property
    def ok(self) -> bool:
        return not self.broken and not self.console and not self.wide and not self.overflow


def browser() -> str:
    """The Chromium binary, or an error that says how to get one."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise NoBrowserError(
        "no Chromium found to render the page: install Debian's package "
        "(sudo apt-get install chromium) or set $CHROMIUM to a Chromium binary"
    )


def check_page(page: Path) -> PageCheck:
    """Render ``page`` (an HTML file) headless; its images and console messages."""
    page = Path(page).resolve()
    html = page.read_text()
    probed = html.replace("</body>", PROBE + "</body>") if "</body>" in html else html + PROBE
    with tempfile.TemporaryDirectory() as profile:
        copy = page.with_name(f".pagecheck-{os.getpid()}.html")
        copy.write_text(probed)
        try:
            done = subprocess.run(
                [
                    browser(),
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--user-data-dir={profile}",
                    f"--window-size={WINDOW[0]},{WINDOW[1]}",
                    "--enable-logging=stderr",
                    "--v=0",
                    "--virtual-time-budget=5000",
                    "--dump-dom",
                    copy.as_uri(),
                ],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        finally:
            copy.unlink(missing_ok=True)
    found = re.search(rf'<pre id="{PROBE_ID}">(.*?)</pre>', done.stdout, re.S)
    if not found:
        raise RuntimeError(f"Chromium did not render {page}: {done.stderr[-500:]}")
    probe = json.loads(_unescape(found.group(1)))
    images = [(src, bool(ok)) for src, ok, _, _ in probe["images"]]
    wide = [src for src, ok, natural, shown in probe["images"] if ok and natural > shown + 1]
    console = [m.group(1) for m in CONSOLE.finditer(done.stderr)]
    return PageCheck(page, images, console, wide, bool(probe["overflow"]))


MODEL_TRAINING_SIDEBAR = ("Model registry",)
"""Shown in MLflow's sidebar in the model-training view only."""
GENAI_CHROME = ("Detect Issues", "Judges", "Sessions")
"""Shown in the GenAI view only: the overview's pop-up, the GenAI sidebar's entries."""
UI_BUDGET_MS = 20000


@dataclass
class UiView:
    """What an MLflow UI address showed in a fresh browser."""

    url: str
    runs_table: bool  # the runs table, with the run it was asked to find
    model_training: bool  # the model-training sidebar
    genai: list[str]  # GenAI chrome it showed

    @property
    def ok(self) -> bool:
        return self.runs_table and self.model_training and not self.genai


def check_ui(url: str, run_name: str, budget_ms: int = UI_BUDGET_MS) -> UiView:
    """Open ``url`` (an experiment in MLflow's UI) in headless Chromium with a fresh
    profile, as a reader's first visit, and say which view it showed: the runs table
    listing ``run_name`` in the model-training view, or the GenAI chrome."""
    dom = render_dom(url, budget_ms)
    return UiView(
        url,
        runs_table="matching runs" in dom and run_name in dom,
        model_training=all(marker in dom for marker in MODEL_TRAINING_SIDEBAR),
        genai=[marker for marker in GENAI_CHROME if marker in dom],
    )


def render_dom(url: str, budget_ms: int = UI_BUDGET_MS) -> str:
    """The DOM ``url`` shows after ``budget_ms`` of virtual time in headless Chromium with
    a fresh profile (a reader's first visit)."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--window-size=1500,900",
             f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
            capture_output=True, text=True, timeout=TIMEOUT_S + budget_ms / 1000,
        )  # fmt: skip
    if "<body" not in done.stdout:
        raise RuntimeError(f"Chromium did not render {url}: {done.stderr[-500:]}")
    return done.stdout


def _unescape(text: str) -> str:
    return (
        text.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )


def main(argv: list[str] | None = None) -> int:
    pages = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not pages:
        print("usage: python -m sweeper.report.pagecheck PAGE.html ...", file=sys.stderr)
        return 2
    try:
        checks = [check_page(p) for p in pages]
    except NoBrowserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for check in checks:
        state = "ok" if check.ok else "BROKEN"
        print(f"{state}: {check.page} ({len(check.images)} images)")
        for src in check.broken:
            print(f"  image did not load: {src}")
        for message in check.console:
            print(f"  console: {message}")
        for src in check.wide:
            print(f"  figure wider than the page (shrunk to fit a {WINDOW[0]} px window): {src}")
        if check.overflow:
            print(f"  the page is wider than a {WINDOW[0]} px window")
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
