"""Screenshots of the MLflow UI as a user compares variants in it (docs/ui.md, "Reading the
results in the MLflow UI"), each opened from the link a sweep prints (sweeper/ui.py): the
comparison ``+exp=smoke``'s link opens (the final regret of every seed per tuner, each
tuner in its colour, the regret curves), after docs/ui.md's first click, and its table
view, each tuner's mean; and a reduced ``+exp=ablation`` (one tuner: no comparison view)
grouped by its own tags ``T1`` and ``k`` by hand, one bar per variant.

    .venv/bin/python bench/ui_screenshots.py            # -> docs/ui/*.png (about two minutes)

It runs both sweeps into a temporary sqlite store, starts an ``mlflow server`` on it
(``sweeper.servers``, 127.0.0.1), and drives headless Chromium (Debian's ``chromium``
package, or ``$CHROMIUM``) through the DevTools protocol: real mouse clicks on the UI's
own buttons, as a user makes them.
Everything it starts is stopped by its process id when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import aiohttp

from sweeper.report.pagecheck import browser
from sweeper.servers import free_port, mlflow_server

ROOT = Path(__file__).resolve().parent.parent
WINDOW = "1500,900"
FIND = """(() => {{
  const said = e => [e.textContent.trim(), e.getAttribute('aria-label'), e.placeholder];
  const hits = {text}.startsWith('css:')
    ? [...document.querySelectorAll({text}.slice(4))].map(e => e.closest('label') || e)
    : [...document.querySelectorAll('button, [role=menuitem], span, div, input')]
        .filter(e => said(e).includes({text}));
  const shown = hits.filter(e => e.getBoundingClientRect().width > 0);
  const e = {first} ? shown[0] : shown.pop();
  if (!e) return null;
  const r = e.getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2];
}})()"""


def wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answered at {url} within {seconds:.0f} s") from None
            time.sleep(0.3)


class Page:
    """One Chromium tab driven over the DevTools protocol."""

    def __init__(self, socket_) -> None:
        self.socket, self.calls = socket_, 0

    async def call(self, method: str, **params):
        self.calls += 1
        await self.socket.send_json({"id": self.calls, "method": method, "params": params})
        async for message in self.socket:
            data = json.loads(message.data)
            if data.get("id") == self.calls:
                return data.get("result", {})
        raise RuntimeError("Chromium closed the connection")

    async def open(self, url: str, ready: str) -> None:
        """Go to ``url`` and wait until the element ``ready`` names is shown."""
        await self.call("Page.navigate", url=url)
        await self.find(ready)

    async def find(
        self, text: str, timeout_s: float = 90, first: bool = False
    ) -> list[float] | None:
        """Where the visible element whose whole text, label or placeholder is ``text`` (or
        that the CSS selector ``css:SELECTOR`` selects) is, once it is shown (None after
        ``timeout_s``: the UI is slow on a loaded machine): the last such element, or the
        first (e.g. the tag ``T1`` of Group by's menu, listed before the param ``T1``)."""
        deadline = time.monotonic() + timeout_s
        script = FIND.format(text=json.dumps(text), first=json.dumps(first))
        while time.monotonic() < deadline:
            found = await self.call("Runtime.evaluate", expression=script, returnByValue=True)
            where = found.get("result", {}).get("value")
            if where:
                return where
            await asyncio.sleep(0.5)
        return None

    async def click(
        self, text: str, required: bool = True, settle_s: float = 2, first: bool = False
    ) -> None:
        """Click the element ``find`` finds, as a mouse would."""
        where = await self.find(text, 90 if required else 3, first)
        if not where and not required:
            return
        if not where:
            await self.screenshot(Path(tempfile.gettempdir()) / "ui_screenshots_failed.png")
            raise RuntimeError(f"no visible '{text}' on the page to click")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.call(
                "Input.dispatchMouseEvent",
                type=kind,
                x=where[0],
                y=where[1],
                button="left",
                clickCount=1,
            )
        await asyncio.sleep(settle_s)

    async def type(self, text: str, settle_s: float = 2) -> None:
        await self.call("Input.insertText", text=text)
        await asyncio.sleep(settle_s)

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


SCENARIOS = {
    # experiment: (the filter, the tags to group by, the screenshots' names); smoke's link
    # opens its comparison itself: the view, then the docs' clicks for the rest
    "smoke": (None, [], ("compare_tuners", "runs_by_tuner")),
    "ablation": ("tags.algorithm = 'linucb'", ["T1", "k"],
                 ("ablation_runs_by_t1_k", "ablation_compare_variants")),
}  # fmt: skip
SWEEPS = {
    "smoke": ["+exp=smoke"],
    "ablation": ["+exp=ablation", "algorithm=linucb", "dataset=simulation", "seeds=3",
                 "horizon=2000"],
}  # fmt: skip
LINK = re.compile(r"then open http://[^/]+(/\S+)")


async def comparison(page: Page, link: str, out: Path, shots: tuple[str, str]) -> None:
    """The printed link (the sweep's comparison), then docs/ui.md's clicks: (1) close the
    Assistant panel, the chart view; (2) the table view, each tuner's mean."""
    chart_png, table_png = shots
    await page.open(link, "Exit shared view")
    await page.click("Close", required=False)  # 1: MLflow's assistant panel
    await page.find("css:.scatterlayer .point")  # the charts drawn again, wider
    await asyncio.sleep(3)
    await page.screenshot(out / f"{chart_png}.png")
    await page.click("css:input[value=TABLE]")  # 2
    await page.screenshot(out / f"{table_png}.png")


async def by_hand(page: Page, link: str, where: str, tags: list[str], out: Path,
                  shots: tuple[str, str]) -> None:  # fmt: skip
    """A sweep without a comparison view (one tuner): filter, Group by its tags, charts."""
    runs_png, chart_png = shots
    # the printed link, with the filter as the UI keeps it in its address
    await page.open(f"{link}&searchFilter={urllib.parse.quote(where)}", "Group by")
    await page.click("Close", required=False)  # MLflow's assistant panel
    await page.click("Group by")  # 1
    for i, tag in enumerate(tags):  # 2: the tags come first in its menu
        if i:  # the menu closes on a choice: open it again
            await page.click(f"Group by: {tags[0]}")
        await page.click(tag, first=True)
    await page.call("Input.dispatchKeyEvent", type="keyDown", key="Escape")
    await asyncio.sleep(1)
    await page.screenshot(out / f"{runs_png}.png")
    await page.click("css:input[value=CHART]")  # 3
    await page.click("Search metric charts")
    await page.type("final_regret", settle_s=5)
    await page.screenshot(out / f"{chart_png}.png")


async def drive(links: dict[str, str], out: Path, profile: str) -> None:
    port = free_port()
    chromium = subprocess.Popen(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
         f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1",
         f"--window-size={WINDOW}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(f"http://127.0.0.1:{port}/json/version", 30)
        tabs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        target = next(t for t in tabs if t["type"] == "page")["webSocketDebuggerUrl"]
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(target, max_msg_size=0) as socket_:
                page = Page(socket_)
                for name, link in links.items():
                    where, tags, shots = SCENARIOS[name]
                    if where is None:
                        await comparison(page, link, out, shots)
                    else:
                        await by_hand(page, link, where, tags, out, shots)
    finally:
        chromium.terminate()
        chromium.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    names = args.only or list(SCENARIOS)
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        paths = {}
        for name in names:
            done = subprocess.run(
                [python, "-m", "sweeper", *SWEEPS[name], f"tracking.uri={store}",
                 f"hydra.run.dir={tmp}/hydra-{name}"],
                check=True, cwd=tmp, capture_output=True, text=True,
            )  # fmt: skip
            paths[name] = LINK.search(done.stdout).group(1)  # the link the sweep printed
        with mlflow_server(store, Path(tmp) / "artifacts", workers=1) as url:
            links = {name: f"{url}{path}" for name, path in paths.items()}
            asyncio.run(drive(links, args.out, f"{tmp}/chromium"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
