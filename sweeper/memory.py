"""Keeping the driver's resident memory flat in the number of cells (issue #15).

Freed memory is not always given back to the operating system: Arrow's default pool
(mimalloc) and glibc's malloc keep freed pages resident, and glibc gives each thread (the
recorder's writer, Ray's and Arrow's own) an arena of its own. So the driver's peak would
grow with the tables it streams and the batches it writes, though nothing it holds does.
"""

from __future__ import annotations

import ctypes
from contextlib import suppress
from functools import cache

import pyarrow as pa

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter (malloc.h)


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None


def lean() -> None:
    """Arrow allocates from the system's malloc (a consolidation of 8,000 rows: +40 MB of
    peak with Arrow's default pool, +4 MB with this and :func:`trim_eagerly`). ``sweeper.run``
    puts the caller's pool back when the sweep ends."""
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())


@cache
def trim_eagerly() -> None:
    """glibc gives the top of its heap back as soon as it is free. Process-wide and not
    undone, so only the command line (a process of the sweep's own) sets it, never
    ``sweeper.run`` in a caller's process."""
    libc = _libc()
    if libc is not None:
        with suppress(AttributeError):
            libc.mallopt(M_TRIM_THRESHOLD, 0)


def give_back() -> None:
    """Return the free pages of every malloc arena to the OS (glibc's ``malloc_trim``; a
    few milliseconds): after each batch the writer thread records (20,000 toy cells: 25 MB
    less resident, the same rate; bench/bench_scale.py)."""
    libc = _libc()
    if libc is not None:
        with suppress(AttributeError):
            libc.malloc_trim(0)
