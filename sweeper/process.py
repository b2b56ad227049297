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
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


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
