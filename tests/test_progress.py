"""The progress bar (sweeper/progress.py): tqdm's on a terminal, fitted to its width; the
plain line elsewhere (logs, ``ray job logs``)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import termios

from sweeper.progress import LOG_EVERY_S, Progress


def _counted(progress: Progress) -> Progress:
    for _ in range(3):
        progress.start()
    progress.finish(ok=True)
    progress.finish(ok=False)
    progress.started -= 10.0  # 2 cells in 10 s, 3 to go
    return progress


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_on_a_narrow_terminal_the_bar_fits_its_width_and_messages_go_above_it():
    """The plain line is about 150 characters: on a terminal of 60 columns it would wrap,
    and each redraw (a carriage return goes back one row only) would leave a row behind."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.ONLCR  # the bytes as written
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    with open(slave, "w", encoding="utf-8", closefd=True) as out:
        progress = _counted(Progress(total=5, out=out))
        progress.draw()
        progress.message("FAILED toy seed=1: boom")
        progress.close()
        shown = _read_all(master)
    os.close(master)
    assert len(progress.line()) > 100
    rows = [row for line in shown.split("\n") for row in line.split("\r") if row.strip()]
    assert "FAILED toy seed=1: boom" in rows
    bars = [row for row in rows if "2/5" in row]
    assert bars and all(len(row) <= 60 for row in rows), rows
    assert "00:10<00:15" in bars[-1]  # the sweep's clock: 10 s elapsed, 15 s to go
    assert shown.endswith("\n")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_is_redrawn_a_few_times_a_second_however_fast_cells_finish():
    out = _Terminal()
    progress = Progress(total=100_000, out=out)
    for _ in range(100_000):
        progress.start()
        progress.finish(ok=True)
        progress.draw()
    assert out.getvalue().count("\r") < 50


def test_off_a_terminal_the_plain_line_is_printed_every_30_s_and_at_the_end():
    out = io.StringIO()
    progress = _counted(Progress(total=5, out=out))
    progress.draw()
    progress.draw()  # within LOG_EVERY_S: not again
    progress.message("FAILED toy seed=1: boom")
    progress._last_log -= LOG_EVERY_S
    progress.draw()
    progress.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[1] == "FAILED toy seed=1: boom" and len(lines) == 4
    assert all(line.startswith("[") and "2/5 done (1 ok, 1 failed)" in line
               for line in lines[:1] + lines[2:])  # fmt: skip
