"""What Ctrl-C (SIGINT) and SIGTERM do, from the driver's first instruction to its exit
(docs/faults.md, "Exit statuses"; issue #41, item 3).

Both mean the same thing, whoever sends them (a terminal, ``ray job stop``, Slurm's
``--signal=B:TERM@120``): stop, keep what finished, say how to resume, exit with status 130.

- While cells run and are recorded, up to the sweep's parent run ending (:func:`graceful`),
  the first one asks the driver to stop between two events: the cells in flight are
  cancelled, the finished ones recorded, the parent run ends KILLED. A second one aborts at
  once (``KeyboardInterrupt``).
- Anywhere else (Python importing, Hydra composing, the store opening, Ray starting, the
  summary), the first one raises ``KeyboardInterrupt`` at once: a parent run that exists
  ends KILLED, the resume command is printed.

- While Ray starts (:func:`starting`), the first one is said and kept: Ray's start ends, then
  the sweep stops as above (no cell ran). A second ends the driver at once, status 130.
  Nothing may raise inside Ray's start: it forks its processes with a ``preexec_fn``, so
  Python's fork hooks run there, and an exception raised in logging's hook ("Exception
  ignored in _releaseLock") leaves logging's lock held, so the next thread that logs
  waits for ever. Ray's own SIGTERM handler (``sys.exit(15)``) is kept out for the same
  reason (sweeper/launch.py).

A signal whose ``KeyboardInterrupt`` something swallowed is still seen: :data:`STOP` keeps it.

This module imports nothing heavy: ``python -m sweeper`` installs it before its imports.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

INTERRUPTED = 130
"""The exit status of a driver stopped by SIGINT or SIGTERM."""
STOPPING = (
    "stopping: cancelling the cells in flight, keeping the finished ones "
    "(press Ctrl-C again to abort at once)"
)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Stop:
    """Whether a signal asked the driver to stop, and where the first one is said while
    cells run (``say``: None outside :func:`graceful`)."""

    requested: bool = False
    say: Callable[[str], None] | None = None


STOP = Stop()
_installed = False


def install() -> None:
    """This module's handler for SIGINT and SIGTERM (the command line's first instruction);
    only the main thread can set one."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        signal.signal(sig, _on_signal)
    _installed = True


def reset() -> None:
    """No stop asked (a test's fresh start)."""
    STOP.requested = False


def begin_sweep() -> None:
    """A new sweep (one process may run several: ``-m``, or calls from Python).

    From Python it starts with no stop asked. On the command line a stop asked before it
    is one whose ``KeyboardInterrupt`` a library swallowed, and it is honoured now by
    raising ``KeyboardInterrupt``: every other stop ends the process before a next sweep.
    Cython's module init swallows one raised while it registers a class with
    ``collections.abc`` (pandas' at import). The sweep then ran to its end with status 0,
    once in 70 SIGTERMs 0.4-2 s into a start here."""
    if STOP.requested and _installed:
        raise KeyboardInterrupt
    reset()


def _on_signal(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal API
    first = not STOP.requested
    STOP.requested = True
    if first and STOP.say is not None:
        STOP.say(STOPPING)
        return
    raise KeyboardInterrupt


@contextmanager
def graceful(say: Callable[[str], None]) -> Iterator[Stop]:
    """For the block (cells running and recorded, the sweep closed): the first signal
    sets ``STOP.requested`` and is said through ``say``; the second raises
    ``KeyboardInterrupt``. In a sweep run from Python the handlers are set for the block
    only (in the main thread), the previous ones restored after."""
    previous = {}
    if not _installed and threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNALS}
    STOP.say = say
    try:
        yield STOP
    finally:
        STOP.say = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def starting(what: str) -> Iterator[None]:
    """For a block no exception may interrupt (``what``: "Ray's start"): the first SIGINT
    or SIGTERM is said and kept in :data:`STOP` (the caller stops after the block); a
    second ends the process at once with status 130 and the resume command (a sweep run
    from Python: raises ``KeyboardInterrupt``). Main thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal API
        if not STOP.requested:
            STOP.requested = True
            _say(f"\nstopping once {what} ends (press Ctrl-C again to abort at once)\n")
            return
        if not _installed:
            raise KeyboardInterrupt
        _say(f"\nInterrupted during {what}: no cell ran yet. Run the same command again:\n"
             f"  {_command()}\n")  # fmt: skip
        os._exit(INTERRUPTED)

    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say(text: str) -> None:
    """``text`` on stderr from a signal handler: one ``write``, never Python's buffer lock,
    which the code the signal interrupted may hold."""
    os.write(sys.stderr.fileno(), text.encode())


def interrupted_early() -> None:
    """Exit 130 after a signal outside a sweep (Python importing, Hydra composing, between
    the sweeps of ``-m``), saying how to start again."""
    print(
        "\nInterrupted outside a sweep: every sweep that ended is recorded, none was left "
        f"RUNNING. Run the same command again (it resumes):\n  {_command()}",
        file=sys.stderr,
        flush=True,
    )
    _forget_caught_interrupt()
    sys.exit(INTERRUPTED)


def exit_after(code: int) -> None:
    """The last instruction: exit with ``code``; from here a signal (while Ray shuts down,
    say) exits with 130 at once, saying the sweep itself had ended."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _on_late_signal)
    _forget_caught_interrupt()
    sys.exit(code)


def _forget_caught_interrupt() -> None:
    """Clear CPython's mark of an unhandled ``KeyboardInterrupt`` before exiting.

    A signal's ``KeyboardInterrupt`` raised inside ``exec`` or ``eval`` of a string (Python
    builds every dataclass's ``__init__`` and every namedtuple so, at import) is marked
    unhandled by CPython even when this module catches it, and ``python -m`` then ends the
    process with SIGINT (status -2) instead of the status given (CI's fault trial "SIGTERM
    while Python starts"). Running a string clears the mark (CPython's ``run_eval_code_obj``
    sets it afresh each time)."""
    exec("")  # noqa: S102 - the empty string: only the mark's reset


def _on_late_signal(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal API
    sys.stdout.flush()
    sys.stderr.write(
        "\nInterrupted while exiting: the sweep had ended and recorded its cells; the same "
        f"command resumes if any are left:\n  {_command()}\n"
    )
    sys.stderr.flush()
    os._exit(INTERRUPTED)


def _command() -> str:
    """This process's command line, a password in it redacted (it is printed)."""
    text = shlex.join(["python", "-m", "sweeper", *sys.argv[1:]])
    try:
        from sweeper.uri import redact
    except (ImportError, KeyboardInterrupt):  # interrupted while importing: say less
        return "python -m sweeper ... (the same arguments)"
    return redact(text)
