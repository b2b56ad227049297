"""Who a driver is and whether it still lives: its id (``host:pid:start``), the process
checks the lock and the lease use, and the store's clock (ms since the epoch)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def now_ms() -> int:
    return int(time.time() * 1000)


def driver_id() -> str:
    """``host:pid:start`` of this process (start from /proc, so a reused pid is told apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def process_start(pid: int) -> str:
    return _stat_field(pid, 19) or "?"


def _stat_field(pid: int, index: int) -> str | None:
    """Field ``index`` of ``/proc/<pid>/stat`` after the command name (0: the state), or
    None when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[index]
    except (OSError, IndexError):
        return None


def driver_alive(driver: str | None) -> bool | None:
    """True/False for a driver on this host; None when it ran elsewhere (cannot tell)."""
    if not driver:
        return None
    host, _, rest = driver.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    if not pid_alive(pid):
        return False
    return start in ("?", "") or process_start(pid) == start


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists on this host (perhaps another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_running(pid: int) -> bool:
    """True when process ``pid`` exists and has not exited: not a zombie its parent has yet
    to reap (a shell reaps a background child only when it next waits)."""
    return pid_alive(pid) and _stat_field(pid, 0) != "Z"
