"""The command as the user ran it: every line the tool prints for the user to paste.

A sweep prints commands to paste into a shell: the resume command after an interrupt or a
store failure (``sweeper.sweep``), the MLflow UI command (``sweeper.ui``), the Slurm
resubmission (``sweeper.slurm``). A resume line that drops ``--config-dir``, the
interpreter that has the package, or the ``PYTHONPATH`` a user's own module came from does
not resume: it fails, or runs another experiment. So each line is built here, from what
the user ran (``sys.orig_argv``, recorded by :func:`record` when the command line starts):

* the directory it ran from (``cd DIR &&``: a relative ``--config-dir`` or sqlite store
  means the same thing again from any shell);
* the environment variables the sweep read (:data:`ENVIRONMENT`), with a note naming the
  modules of the sweep that came from ``PYTHONPATH``;
* the interpreter as an absolute path (``sys.executable``: the one that has the package),
  or the console script the user called (``.venv/bin/sweeper``);
* every flag and override, each quoted for the shell;
* passwords in URIs redacted (:func:`sweeper.uri.redact`): such a line is to be
  completed by hand, never leaked.

A program that wraps the tool says how to run it again with ``$SWEEPER_COMMAND``
(``sweeper-slurm``'s batch script sets it to its ``sbatch`` line): the resume line is that.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sweeper.uri import redact

ENVIRONMENT = ("PYTHONPATH", "SWEEPER_DATA_DIR", "MLFLOW_TRACKING_URI", "RAY_ADDRESS")
"""Variables that change what a sweep runs or where it records: the modules Python finds,
the cells' data, the default store, the default Ray cluster."""
WRAPPER = "SWEEPER_COMMAND"
"""Set by a program that runs the tool for the user: the command that runs it again."""
MAX_MODULES = 5


@dataclass(frozen=True)
class Command:
    """A command to paste: ``cd cwd && NAME=value ... argv``.

    Parameters
    ----------
    argv : the program and its arguments.
    cwd : the directory it runs in.
    env : the environment variables it needs, as (name, value) pairs.
    """

    argv: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...] = ()

    def shell(self) -> str:
        """The line to paste, quoted for a POSIX shell, passwords redacted."""
        words = [f"{name}={shlex.quote(value)}" for name, value in self.env]
        words += [shlex.quote(word) for word in self.argv]
        return redact(f"cd {shlex.quote(self.cwd)} && {' '.join(words)}")

    def notes(self) -> list[str]:
        """Why an environment variable is part of the line: the modules found through
        ``PYTHONPATH`` (a user's own tuner, say)."""
        path = dict(self.env).get("PYTHONPATH")
        found = modules_from(path, self.cwd) if path else []
        if not found:
            return []
        listed = ", ".join(found[:MAX_MODULES]) + (" ..." if len(found) > MAX_MODULES else "")
        return [f"(PYTHONPATH is part of it: the sweep's module(s) {listed} came from it)"]

    def lines(self) -> str:
        """The line and its notes, each indented for a message."""
        return "\n".join(f"  {line}" for line in [self.shell(), *self.notes()])


_recorded: list[Command] = []


def record(orig_argv: Sequence[str] | None = None) -> Command:
    """Record how this process was started (``sys.orig_argv``) as the sweep's command;
    the command line (``sweeper.__main__.entry``) calls it first."""
    _recorded[:] = [_started(list(sys.orig_argv if orig_argv is None else orig_argv))]
    return _recorded[0]


def forget() -> None:
    """Forget the recorded command: the next sweep of this process (the Python API's, after a
    command line ran in it, as in a test session) is said as ``python -m sweeper``."""
    _recorded.clear()


def sweep_command(overrides: Sequence[str] = ()) -> Command:
    """The command that runs this sweep again: the one recorded at the start, else (the
    Python API, tests) ``python -m sweeper`` with ``overrides``."""
    if _recorded:
        return _recorded[0]
    argv = (sys.executable, "-m", "sweeper", *overrides)
    return Command(argv, os.getcwd(), environment())


def resume_lines(overrides: Sequence[str] = ()) -> str:
    """The resume command as printed: ``$SWEEPER_COMMAND`` when a wrapper set it, else
    :func:`sweep_command` (indented, with its notes)."""
    wrapper = os.environ.get(WRAPPER)
    if wrapper:
        return f"  {redact(wrapper)}"
    return sweep_command(overrides).lines()


def tool(name: str, *args: str) -> Command:
    """The console script ``name`` of the package's environment (beside the interpreter,
    where ``pip`` put it), else ``python -m name``; in the working directory."""
    beside = Path(sys.executable).parent / name
    program = (str(beside),) if beside.is_file() else (sys.executable, "-m", name)
    return Command((*program, *args), os.getcwd())


def environment() -> tuple[tuple[str, str], ...]:
    """The variables of :data:`ENVIRONMENT` set in this process, in that order."""
    return tuple((name, os.environ[name]) for name in ENVIRONMENT if os.environ.get(name))


def modules_from(path: str, cwd: str) -> list[str]:
    """Top-level modules imported in this process from a directory of ``path`` (a
    ``PYTHONPATH``; relative entries against ``cwd``)."""
    roots = [(Path(cwd) / entry).resolve() for entry in path.split(os.pathsep) if entry]
    found = set()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or "." in name:
            continue
        where = Path(file).resolve()
        if any(where.is_relative_to(root) for root in roots):
            found.add(name)
    return sorted(found)


def _started(orig_argv: list[str]) -> Command:
    """The command from the interpreter's own argv: the interpreter made absolute, a
    console script called by itself, everything else as typed."""
    rest = orig_argv[1:]
    script = _script(rest)
    if script is not None:
        path = Path(rest[script]).absolute()
        if os.access(path, os.X_OK) and path.suffix != ".py":  # a console script
            return Command((str(path), *rest[script + 1 :]), os.getcwd(), environment())
        rest[script] = str(path)
    return Command((sys.executable, *rest), os.getcwd(), environment())


def _script(words: list[str]) -> int | None:
    """Where the script is among the interpreter's arguments (None for ``-m``, ``-c``)."""
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith(("-m", "-c")):
            return None
        if not word.startswith("-"):
            return index
        index += 2 if word in ("-X", "-W", "--check-hash-based-pycs") else 1
    return None
