"""The sweep's progress bar and closing summary.

On a terminal the bar is tqdm's: what a terminal user expects (the bar Optuna and Hugging
Face show), fitted to the terminal's width at each redraw, so a narrow window gets
a shorter line, never a wrapped one that each redraw repeats, and redrawn at most every
:data:`TTY_EVERY_S` seconds however fast cells finish. tqdm is already installed (Optuna, a
dependency, needs it), so it costs nothing. rich would add a dependency for the same bar.

Elsewhere (a log file, ``ray job logs``, a batch job's output) tqdm's carriage returns would
pile up on one line, so the plain line stays: :meth:`Progress.line`, printed every
:data:`LOG_EVERY_S` seconds, one line each, readable with ``grep`` and ``tail``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

LOG_EVERY_S = 30.0
TTY_EVERY_S = 0.1
BAR_WIDTH = 24
TTY_FORMAT = (
    "{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)
"""tqdm's own layout (its default), the sweep's counts as its postfix."""


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
    _last_draw: float = -math.inf
    _bar: Any = field(default=None, repr=False)  # tqdm's, on a terminal, from the first draw
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
        """The plain progress line (logs, ``ray job logs``)."""
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
        now = time.perf_counter()
        if self._tty():
            if force or now - self._last_draw >= TTY_EVERY_S:
                self._redraw()
                self._last_draw = now
        elif force or now - self._last_log >= LOG_EVERY_S:
            print(self.line(), file=self.out, flush=True)
            self._last_log = now

    def _redraw(self) -> None:
        """tqdm's bar brought to the counts (its clock the sweep's: the same rate and ETA)."""
        queued = self.remaining - self.running
        counts = f"{self.failed} failed, {self.running} running, {queued} queued"
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total, file=self.out, ncols=self._columns(), nrows=20, unit="cell",
                bar_format=TTY_FORMAT, smoothing=0, postfix=counts,
            )  # fmt: skip
            self._bar.start_t -= self.elapsed
        self._bar.total, self._bar.n, self._bar.ncols = self.total, self.done, self._columns()
        self._bar.set_postfix_str(counts, refresh=False)
        self._bar.refresh()

    def _columns(self) -> int | None:
        """The terminal's width now (None: unknown). Asked at each redraw rather than by
        tqdm's ``dynamic_ncols``, which hides the bar on a terminal that reports no rows."""
        try:
            return os.get_terminal_size(self.out.fileno()).columns or None
        except (AttributeError, OSError, ValueError):  # no file descriptor, or not a terminal
            return None

    def message(self, text: str) -> None:
        """Print a line above the bar (e.g. a failed cell as soon as it fails); also from the
        thread that records cells."""
        with self._lock:
            if self._bar is not None:
                self._bar.clear()
            print(text, file=self.out, flush=True)
            if self._bar is not None:
                self._bar.refresh()
            else:
                self._draw(False)

    def close(self) -> None:
        with self._lock:
            if self._tty():
                self._redraw()
                self._bar.close()
            else:
                self._draw(force=True)
