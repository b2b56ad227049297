"""What every bench shares: the header of its results file, medians of repeats, and ratios
of two things measured in the same run.

    from harness import Bench, interleaved, measure, ratio

    bench = Bench(libraries=("numpy",))          # at the start: the clock, the load before
    cell = measure(lambda: work(), repeats=3)    # wall and CPU seconds of every call
    print(cell.wall, cell.cpu, cell.walls)       # the medians, every run's wall time
    both = interleaved({"a": a, "b": b}, 5)      # a, b, then b, a, ...: a load change hits both
    print(ratio(both["a"], both["b"]))           # a / b, paired by repeat
    bench.write(out, "# Title", body_lines)      # the header, then the body

The header says when the bench ran (UTC) and for how long, by which command, at which
commit (and whether the code had uncommitted changes), on what machine (its CPUs and those
this process may use, the architecture and CPU model, Python and the libraries named) and
the 1-minute load average before and after. When either was at or above the number of CPUs
(the load after less the CPUs the bench keeps busy itself), it says that the figures were
measured under load.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Timing:
    """Wall and CPU seconds of each of several calls, and what each call returned.

    CPU time is this process's (every thread, no child process): on a busy machine it
    estimates the idle wall time of single-process work better than the wall clock does.
    """

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)

    @property
    def wall(self) -> float:
        """The median wall time, in seconds."""
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        """The median CPU time, in seconds."""
        return statistics.median(self.cpus)

    @property
    def value(self) -> Any:
        """What the last call returned."""
        return self.values[-1]

    def add(self, call: Callable[[], Any]) -> None:
        """Call ``call`` once, recording its times and what it returned."""
        wall, cpu = time.perf_counter(), time.process_time()
        self.values.append(call())
        self.cpus.append(time.process_time() - cpu)
        self.walls.append(time.perf_counter() - wall)


def measure(call: Callable[[], Any], repeats: int = 1) -> Timing:
    """Wall and CPU seconds of ``repeats`` calls of ``call``, one after the other."""
    timing = Timing()
    for _ in range(repeats):
        timing.add(call)
    return timing


def interleaved(calls: Mapping[str, Callable[[], Any]], repeats: int) -> dict[str, Timing]:
    """Every call once per repeat, the order rotated each repeat, so that a change of the
    machine's load hits them all alike: the way to time things that are compared."""
    timings = {name: Timing() for name in calls}
    names = list(calls)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            timings[name].add(calls[name])
    return timings


@dataclass
class Ratio:
    """``a / b`` of two timings of the same run: the median of the per-repeat ratios."""

    value: float
    repeats: int
    clock: str

    def __format__(self, spec: str) -> str:
        """``f"{r}"``: the value and how it was measured; ``f"{r:.1f}"``: the value."""
        return format(self.value, spec) if spec else str(self)

    def __str__(self) -> str:
        pairs = "one repeat" if self.repeats == 1 else f"median of {self.repeats} repeats"
        return f"{self.value:.2f}x ({self.clock} time, {pairs} of this run)"


def ratio(a: Timing, b: Timing, clock: str = "wall") -> Ratio:
    """``a / b``, repeat by repeat (``clock``: ``wall`` or ``cpu``), then the median."""
    top, bottom = (getattr(t, f"{clock}s") for t in (a, b))
    if len(top) != len(bottom):
        raise ValueError(f"a ratio pairs repeats: {len(top)} against {len(bottom)}")
    return Ratio(
        statistics.median(x / y for x, y in zip(top, bottom, strict=True)), len(top), clock
    )


@dataclass
class Facts:
    """What a results file's header says (see the module docstring)."""

    started: datetime
    seconds: float
    command: str
    commit: str
    dirty: bool
    cpus: int
    usable: int
    machine: str
    python: str
    libraries: dict[str, str]
    load_before: float
    load_after: float
    busy: float

    @property
    def under_load(self) -> bool:
        """The load, others' share of it, at or above the number of CPUs."""
        return max(self.load_before, self.load_after - self.busy) >= self.cpus


def header(facts: Facts) -> list[str]:
    """The header's lines (a Markdown list)."""
    libraries = "".join(f", {name} {v}" for name, v in facts.libraries.items())
    lines = [
        f"- Measured: {facts.started:%Y-%m-%d %H:%M} UTC, for {_duration(facts.seconds)}, "
        f"by `{facts.command}`",
        f"- Commit: {facts.commit}" + (" with uncommitted changes" if facts.dirty else ""),
        f"- Machine: {facts.cpus} CPUs ({facts.usable} usable by the bench), {facts.machine}; "
        f"Python {facts.python}{libraries}",
        f"- Load average (1 min): {facts.load_before:.2f} before, {facts.load_after:.2f} after "
        f"(the bench itself keeps about {facts.busy:g} CPU{'s' if facts.busy != 1 else ''} busy)",
    ]
    if facts.under_load:
        lines.append(
            f"- **Measured under load**: other work kept the load at or above the "
            f"{facts.cpus} CPUs, so its times are longer than an idle machine's"
        )
    return lines


class Bench:
    """One run of a bench: created at its start, it writes the results file's header.

    Parameters
    ----------
    libraries : sequence of str
        The distributions whose versions the header names (besides Python).
    busy : float
        About how many CPUs the bench keeps busy itself (its part of the load after).
    command : str, optional
        How the bench was run; default: this process's command line.
    """

    def __init__(
        self, libraries: Sequence[str] = ("numpy",), busy: float = 1, command: str | None = None
    ) -> None:
        self.libraries, self.busy = tuple(libraries), busy
        self.command = command or _command_line()
        self.started, self.clock = datetime.now(UTC), time.perf_counter()
        self.load_before = os.getloadavg()[0]
        self.commit, self.dirty = _commit()

    def facts(self) -> Facts:
        """The header's facts now (the load after read now)."""
        cpus = os.cpu_count() or 1
        affinity = getattr(os, "sched_getaffinity", None)  # Linux
        return Facts(
            started=self.started,
            seconds=time.perf_counter() - self.clock,
            command=self.command,
            commit=self.commit,
            dirty=self.dirty,
            cpus=cpus,
            usable=len(affinity(0)) if affinity else cpus,
            machine=f"{platform.machine()} ({_cpu_model()})",
            python=platform.python_version(),
            libraries={name: _version(name) for name in self.libraries},
            load_before=self.load_before,
            load_after=os.getloadavg()[0],
            busy=self.busy,
        )

    def header(self) -> list[str]:
        """The header's lines, as of now."""
        return header(self.facts())

    def write(self, path: Path | str, title: str, body: Sequence[str]) -> None:
        """Write ``title``, the header and ``body`` (lines) to ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([title, "", *self.header(), "", *body]).rstrip() + "\n")
        print(f"wrote {path}", file=sys.stderr)


def write_sections(
    out: Path,
    title: Sequence[str],
    parts: Sequence[str],
    sections: Mapping[str, Sequence[str]],
    header: Sequence[str],
) -> None:
    """A results file of several parts measured in different runs: ``title``, then each of
    ``parts`` in order, each between ``<!-- part:NAME -->`` marks. The parts measured in
    this run (``sections``) are written after ``header`` (this run's); the others are kept
    as ``out`` has them."""
    kept: dict[str, str] = {}
    if out.exists():
        text = out.read_text()
        for part in parts:
            start, end = f"<!-- part:{part} -->", f"<!-- /part:{part} -->"
            if start in text and end in text:
                kept[part] = text[text.index(start) : text.index(end) + len(end)]
    for part, lines in sections.items():
        kept[part] = "\n".join(
            [f"<!-- part:{part} -->", *header, "", *lines, f"<!-- /part:{part} -->"]
        )
    body = [kept[part] for part in parts if part in kept]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(title) + "\n" + "\n\n".join(body) + "\n")
    print(f"wrote {out}", file=sys.stderr)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _command_line() -> str:
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return shlex.join(["python", str(shown), *sys.argv[1:]])


def _commit() -> tuple[str, bool]:
    """HEAD's short hash, and whether tracked files (bench/results aside) differ from it."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        except OSError:  # no git here
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown (not a git checkout)"
    changes = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results")
    return commit, bool(changes)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU model unknown"


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"
