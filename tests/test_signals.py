"""A signal while Ray starts is kept, not raised inside Ray's start (sweeper/signals.py,
``starting``; sweeper/launch.py, ``init_ray``).

Ray forks its processes with a ``preexec_fn``, so Python's fork hooks run inside its start;
an exception a handler raised in logging's hook once left logging's lock held and the
driver hung until it was killed (the fault trial "SIGTERM while Ray starts").
"""

import importlib
import inspect
import io
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from sweeper import signals
from sweeper.launch import RAY_SETS_SIGTERM


@pytest.fixture(autouse=True)
def _no_stop_yet():
    signals.reset()
    yield
    signals.reset()


def test_the_first_signal_while_starting_is_said_and_kept_not_raised(capfd):
    before = signal.getsignal(signal.SIGTERM)
    with signals.starting("Ray's start"):
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here, and raises nothing
        reached = True
    assert reached and signals.STOP.requested
    assert "stopping once Ray's start ends" in capfd.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before  # the handler of before, put back


def test_a_second_signal_from_python_raises_keyboard_interrupt(monkeypatch):
    monkeypatch.setattr(signals, "_installed", False)  # as in a sweep run from Python
    with pytest.raises(KeyboardInterrupt), signals.starting("Ray's start"):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)


def test_a_second_signal_on_the_command_line_exits_130_with_the_resume_command():
    script = textwrap.dedent(
        """
        import os, signal, time
        from sweeper import signals
        signals.install()
        with signals.starting("Ray's start"):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "task=toy"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert "Interrupted during Ray's start: no cell ran yet" in done.stderr
    assert "python -m sweeper task=toy" in done.stderr
    assert "Traceback" not in done.stderr


def test_ray_still_sets_its_sigterm_handler_where_the_driver_keeps_it_out():
    module, name = RAY_SETS_SIGTERM
    assert callable(getattr(importlib.import_module(module), name, None)), (
        f"{module}.{name} is gone from this Ray: update sweeper/launch.py"
    )
    from ray._private import worker

    assert f"{name}(" in inspect.getsource(worker.init), (
        f"ray.init no longer calls {name}: see how it sets SIGTERM's handler now"
    )


MAIN_CATCHING = """
import os, signal, sys
from sweeper import signals
signals.install()
try:  # as a dataclass or namedtuple is built at import: exec of a string
    exec("os.kill(os.getpid(), signal.SIGTERM)")
except KeyboardInterrupt:
    if sys.argv[1] == "early":
        signals.interrupted_early()
signals.exit_after(int(sys.argv[2]))
"""


@pytest.mark.parametrize(("how", "status"), [("early", 130), ("late", 1), ("late", 0)])
def test_a_signal_caught_inside_exec_of_a_string_keeps_the_exit_status(tmp_path, how, status):
    """CPython marks a KeyboardInterrupt raised inside exec() of a string as unhandled even
    when it is caught, and ``python -m`` then ends with SIGINT (status -2): the fault trial
    "SIGTERM while Python starts" met it when the signal landed in a dataclass's exec."""
    (tmp_path / "caught").mkdir()
    (tmp_path / "caught" / "__init__.py").write_text("")
    (tmp_path / "caught" / "__main__.py").write_text(MAIN_CATCHING)
    done = subprocess.run(
        [sys.executable, "-m", "caught", how, str(status)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == status, done.stderr
    assert ("Run the same command again" in done.stderr) == (how == "early")


MAIN_SWALLOWING = """
import os, signal, time
from sweeper import signals
signals.install()
try:  # as Cython's module init does with one raised while it registers with collections.abc
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
except BaseException:
    pass
try:
    signals.begin_sweep()
except KeyboardInterrupt:
    signals.interrupted_early()
print("the sweep ran")
"""


def test_a_stop_a_library_swallowed_before_the_sweep_is_honoured(tmp_path):
    """On the command line a SIGTERM whose KeyboardInterrupt a library swallowed before the
    sweep began stops it as it begins (it ran to its end with status 0)."""
    (tmp_path / "swallowing").mkdir()
    (tmp_path / "swallowing" / "__init__.py").write_text("")
    (tmp_path / "swallowing" / "__main__.py").write_text(MAIN_SWALLOWING)
    done = subprocess.run(
        [sys.executable, "-m", "swallowing"], cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 130, done.stdout + done.stderr
    assert "the sweep ran" not in done.stdout and "Run the same command again" in done.stderr


def test_a_sweep_from_python_starts_with_no_stop_asked(composer, tmp_path, monkeypatch):
    """From Python (no command-line handlers) a stop left from before is forgotten by the
    next sweep; with the command line's handlers, run_sweep raises before it opens a store."""
    from sweeper.sweep import run_sweep

    overrides = ["task=toy", "launcher.name=local", "seeds=2", "horizon=3",
                 f"tracking.uri=sqlite:///{tmp_path}/m.db"]  # fmt: skip
    monkeypatch.setattr(signals, "_installed", True)
    signals.STOP.requested = True
    with pytest.raises(KeyboardInterrupt):
        run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert not (tmp_path / "m.db").exists()
    monkeypatch.setattr(signals, "_installed", False)
    done = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert (done.finished, done.interrupted) == (2, False)
