"""The sweep's progress bar and closing summary (plain text, no dependency).

On a terminal the bar redraws one line in place; elsewhere (a log file, ``ray job logs``)
it prints a line every :data:`LOG_EVERY_S` seconds, so logs stay readable.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

LOG_EVERY_S = 30.0
BAR_WIDTH = 24


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


@dataclass
class Progress:
    """Counts of the cells this run dispatches: done, failed, running, remaining, and an ETA."""

    total: int
    out: TextIO = field(default_factory=lambda: sys.stdout)
    started: float = field(default_factory=time.perf_counter)
    finished: int = 0
    failed: int = 0
    running: int = 0
    _last_log: float = 0.0
    _drawn: bool = False
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)  # writer thread

    @property
    def done(self) -> int:
        return self.finished + self.failed

    @property
    def remaining(self) -> int:
        return self.total - self.done

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def eta(self) -> float:
        """Seconds left at the pace so far (cells per second since the start)."""
        if self.done == 0:
            return float("nan")
        return self.elapsed / self.done * self.remaining

    def start(self) -> None:
        self.running += 1

    def finish(self, ok: bool, was_running: bool = True) -> None:
        if was_running:
            self.running = max(0, self.running - 1)
        if ok:
            self.finished += 1
        else:
            self.failed += 1

    def line(self) -> str:
        filled = int(BAR_WIDTH * self.done / self.total) if self.total else BAR_WIDTH
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        rate = self.done / self.elapsed if self.elapsed > 0 else 0.0
        return (
            f"[{bar}] {self.done}/{self.total} done ({self.finished} ok, {self.failed} failed), "
            f"{self.remaining} remaining ({self.running} running, "
            f"{self.remaining - self.running} queued), "
            f"{format_duration(self.elapsed)} elapsed, {rate:.2f} cells/s, "
            f"ETA {format_duration(self.eta)}"
        )

    def _tty(self) -> bool:
        isatty = getattr(self.out, "isatty", None)
        return bool(isatty and isatty())

    def draw(self, force: bool = False) -> None:
        with self._lock:
            self._draw(force)

    def _draw(self, force: bool) -> None:
        if self._tty():
            print("\r" + self.line() + "  ", end="", file=self.out, flush=True)
            self._drawn = True
        elif force or time.perf_counter() - self._last_log >= LOG_EVERY_S:
            print(self.line(), file=self.out, flush=True)
            self._last_log = time.perf_counter()

    def message(self, text: str) -> None:
        """Print a line above the bar (e.g. a failed cell as soon as it fails); also from the
        thread that records cells."""
        with self._lock:
            if self._drawn:
                print("\r" + " " * (len(self.line()) + 2) + "\r", end="", file=self.out)
                self._drawn = False
            print(text, file=self.out, flush=True)
            self._draw(False)

    def close(self) -> None:
        if self._tty():
            self.draw()
            print(file=self.out, flush=True)
        else:
            self.draw(force=True)
