"""Every bad input of issue #27 (item 3) is one paragraph naming the setting and its fix,
raised before anything runs: no parent run, nothing RUNNING, no lock file beside a store
that did not exist."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient

from sweeper.configs import compose
from sweeper.errors import SweepError
from sweeper.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent


def _sweep(composer, *overrides: str, out=None):
    """A sweep composed as the command line composes it (sweeper.configs.compose: what
    composition refuses is a SweepError); ``composer`` holds Hydra's context."""
    overrides = ["task=toy", "launcher.name=local", *overrides]
    return run_sweep(compose(overrides), compose, overrides, out=out or io.StringIO())


def _runs(uri: str) -> list:
    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids, max_results=1000) if ids else []


BAD = [
    (["cell=nope.nope"], r"cell=nope.nope: no cell function there"),
    (["tracking.uri=ftp://x"], r"tracking.uri=ftp://x: 'ftp' is not a kind of MLflow store"),
    (["tracking.uri=mlflow.db"], r"tracking.uri=sqlite:///mlflow.db \(three slashes"),
    (["tracking.uri=file:///tmp/mlruns"], r"MLflow's file store, which sweeper does not"),
    (["tracking.uri=sqlite://"], r"names no sqlite file"),
    (["experiment.name="], r"experiment.name is empty"),
    (["experiment.name=null"], r"experiment.name=null gives experiment.name a value it cannot"),
    ([f"experiment.name={'x' * 300}"], r"experiment.name is 300 characters long"),
    (["experiment.name=../../escaped"], r"is a path out of the artifact store"),
    (["launcher.timeout_s=abc"], r"'abc' .* launcher.timeout_s is a number, or null"),
    (["launcher.timeout_s=0"], r"launcher.timeout_s must be a positive number .* got 0.0"),
    (["launcher.num_cpus=0"], r"launcher.num_cpus must be a whole number, at least 1"),
    (["launcher.num_cpus=abc"], r"'abc' .* launcher.num_cpus is a whole number, or null"),
    (["launcher.max_retries=null"], r"not Optional\): launcher.max_retries is a whole number"),
    (["experiment.name='héllo'"], r"holds 'é' \(U\+00E9 LATIN SMALL LETTER E WITH ACUTE\)"),
    (["experiment.name='a\nb'"], r"holds '\\n' \(U\+000A a control character\)"),
    (["experiment.name='say \"hi\"'"], r"holds '\"' \(U\+0022 QUOTATION MARK\)"),
    (["experiment.name='a\x07b'"], r"holds '\\x07' \(U\+0007 a control character\)"),
    (["horizon=1000000000000"], r"horizon=1,000,000,000,000 steps need .* GiB .* more than this"),
    (["horizon=-1"], r"horizon must be a positive whole number of steps, got -1"),
    (["horizon=abc"], r"horizon must be a positive whole number of steps, got 'abc'"),
    (["seeds=10000000"], r"seeds=10000000 alone makes 10,000,000 cells, more than sweep.max_"),
    (
        ["seeds=10", "sweep.grid={horizon:[5,6,7]}", "sweep.max_cells=20"],
        r"this sweep has 30 cells, more than sweep.max_cells=20",
    ),
    (["rerun=maybe"], r"'maybe' is not a valid bool .*\): rerun is true or false, e.g. rerun=f"),
    (["tracking.direct_writes=sometimes"], r"tracking.direct_writes is true or false"),
    (["tracking.database=sqlite:///other.db"], r"not the tracking store's own database"),
    (["tracking.database=http://x:5000"], r"tracking.database=http://x:5000 is not a SQL"),
    (["tracking.uri=postgresql+pg8000://u@127.0.0.1/db"], r"needs the database driver 'pg8000'"),
    (["tracking.uri=mysql://u@127.0.0.1/db"], r"driver 'MySQLdb', .* pip install 'mysqlclient'"),
    (["tracking.batch_size=0"], r"tracking.batch_size must be a whole number, at least 1"),
    (["tracking.patience_s=0"], r"tracking.patience_s must be a positive number of seconds"),
    (["sweep.grid={tunr:[tl,op]}"], r"sweep.grid key 'tunr' is neither a config group nor a"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[" ".join(o)[:40] for o, _ in BAD])
def test_bad_input_is_one_paragraph_before_anything_runs(
    composer, tmp_path, monkeypatch, overrides, message
):
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path}/store.db"
    uri = [] if any(o.startswith("tracking.uri=") for o in overrides) else [f"tracking.uri={store}"]
    with pytest.raises(SweepError, match=message) as raised:
        _sweep(composer, *uri, *overrides)
    assert "\n" not in str(raised.value)
    assert not list(tmp_path.iterdir()), "a refused sweep left files behind"


def test_a_bad_input_on_an_existing_store_leaves_nothing_running(composer, tracking_uri):
    with pytest.raises(SweepError, match="experiment.name is 300 characters long"):
        _sweep(composer, f"tracking.uri={tracking_uri}", f"experiment.name={'y' * 300}")
    assert not [r for r in _runs(tracking_uri) if r.info.status == "RUNNING"]


def test_rerun_no_is_false_and_rerun_yes_recomputes(composer, tracking_uri):
    args = [f"tracking.uri={tracking_uri}", "seeds=2", "horizon=5", "experiment.name=bools"]
    assert _sweep(composer, *args).finished == 2
    again = _sweep(composer, *args, "rerun=no")
    assert (again.skipped, again.finished) == (2, 0)
    assert _sweep(composer, *args, "rerun=yes").finished == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (docs/faults.md)")
def test_a_full_disk_is_refused_before_a_lock_file_exists(composer, tmp_path):
    disk = tmp_path / "full"  # a real full disk, never a mocked one
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, f"as root, mounting a tmpfs failed: {mounted.stderr}"
    try:
        with pytest.raises(SweepError, match=r"kB free, less than the 8 MB .* free disk space"):
            _sweep(composer, f"tracking.uri=sqlite:///{disk}/mlflow.db", "experiment.name=d")
        assert not list(disk.iterdir())
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_the_command_line_exits_2_without_a_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", "task=toy", "cell=nope.nope",
         f"tracking.uri=sqlite:///{tmp_path}/m.db", f"hydra.run.dir={tmp_path}/h"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert "cell=nope.nope: no cell function there" in done.stdout + done.stderr


def test_a_password_in_a_uri_is_never_printed_nor_left_in_hydras_files(tmp_path):
    """Issue #27, item 4: a tracking.database password in the refusal, in Hydra's copies
    of the config and in the resume command."""
    from sweeper.command import sweep_command

    secret = "s3cret-pw"
    database = f"tracking.database=postgresql+psycopg://bob:{secret}@127.0.0.1:1/x"
    assert secret not in sweep_command([database, "seeds=2"]).shell()
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", "task=toy", database,
         f"tracking.uri=sqlite:///{tmp_path}/m.db", f"hydra.run.dir={tmp_path}/h"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "bob:***@127.0.0.1" in done.stdout + done.stderr
    assert secret not in done.stdout + done.stderr
    written = [p.read_text() for p in tmp_path.rglob("*.yaml")]  # Hydra's, when it writes
    assert not [text for text in written if secret in text]


# --- issue #41, item 4: the remaining bad inputs ------------------------------------------


def test_a_misspelled_grid_key_is_refused_with_the_closest_group(composer, tmp_path, monkeypatch):
    """``tunr: [tl, op]`` ran the default tuner under new cell keys; a key the config does
    not have is added only as ``+KEY``, as on the command line."""
    monkeypatch.chdir(tmp_path)
    grid = ["tracking.uri=sqlite:///store.db", "horizon=10", "seeds=1"]
    with pytest.raises(SweepError, match=r"'tunr' .* did you mean 'tuner'\? .* write it '\+tunr'"):
        run_sweep(compose([*grid, "sweep.grid={tunr:[tl,op]}"]), compose, grid)
    nested = [*grid, "sweep.grid={tuner:[tl],tuner.restart_multiplierr:[1.0]}"]
    with pytest.raises(SweepError, match=r"no 'restart_multiplierr' in 'tuner'"):
        run_sweep(compose(nested), compose, grid)
    assert not list(tmp_path.iterdir())
    added = _sweep(composer, "tracking.uri=sqlite:///store.db", "sweep.grid={+toy.shift:[0,1]}")
    assert added.finished == 2 and {s.split("/")[0] for s in added.settings.values()} == {
        "shift=0",
        "shift=1",
    }


class _Everything(BaseHTTPRequestHandler):
    """A web server that answers 200 to every request (a proxy's default page)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = b"<html>OK</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def answers_everything():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Everything)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


NO_STORE = [
    ("notadb.txt", r"notadb.txt .* is not an SQLite database"),
    ("adir", r"names the directory .*adir, not a file"),
    ("http", r"answers, but not as an MLflow tracking server: .* HTTP 200"),
]


@pytest.mark.parametrize(("where", "message"), NO_STORE, ids=[w for w, _ in NO_STORE])
@pytest.mark.parametrize("dry_run", ["false", "true"])
def test_a_uri_that_is_no_store_is_refused_leaving_nothing(
    composer, tmp_path, answers_everything, where, message, dry_run
):
    """A file that is not a database, a directory, a web server that is not MLflow's: exit 2
    before a lock file or a store is made (it was exit 3, "free disk space", and a
    notadb.txt.lock)."""
    (tmp_path / "notadb.txt").write_text("hello\n")
    (tmp_path / "adir").mkdir()
    uri = answers_everything if where == "http" else f"sqlite:///{tmp_path}/{where}"
    with pytest.raises(SweepError, match=message):
        _sweep(composer, f"tracking.uri={uri}", "experiment.name=nostore", f"dry_run={dry_run}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "notadb.txt"]
    assert not list((tmp_path / "adir").iterdir())


def _exit_of(argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """``sweeper ARGV`` in this process (only for input it refuses): status and stderr."""
    from sweeper.__main__ import entry

    monkeypatch.setattr(sys, "argv", ["sweeper", *argv])
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as done:
        entry()
    return done.value.code, capsys.readouterr().err


BROKEN_YAML = "# @package _global_\nsweep:\n  grid: {horizon: [1, 2]\nseeds: 2\n"
COMMAND_LINES = [
    (["--config-dir", "{tmp}/nowhere", "task=toy"], r"nowhere: no such directory"),
    (["task=toy", "seeds=[1,2"], r"'seeds=\[1,2' cannot be parsed: no viable alternative"),
    (["task=toy", "experiment.name=héllo"], r"token recognition error at: 'é'"),
    (["=5"], r"the override '=5' sets no key"),
    (["--config-dir", "{tmp}", "+exp=broken"], r"exp/broken.yaml is not valid YAML: .*line 4"),
    (["task=toy", "launcher.max_retries=null"], r"launcher.max_retries is a whole number"),
]


@pytest.mark.parametrize(
    ("argv", "message"), COMMAND_LINES, ids=[" ".join(a)[-30:] for a, _ in COMMAND_LINES]
)
def test_what_hydra_refused_with_status_1_exits_2_in_one_paragraph(
    tmp_path, capsys, monkeypatch, tracking_uri, argv, message
):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp/broken.yaml").write_text(BROKEN_YAML)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    status, said = _exit_of([*argv, f"tracking.uri={tracking_uri}"], capsys, monkeypatch)
    assert status == 2, said
    assert re.search(message, said), said
    assert said.startswith("error: ") and said.count("\n") == 1, said


def test_a_damaged_store_is_not_said_to_have_lost_nothing(composer, tracking_uri, capsys):
    """A sqlite file whose pages are damaged fails the sweep (exit 3); what it held may be
    lost, so "Nothing was lost" is not said."""
    from sweeper.multirun import run_or_exit

    overrides = ["task=toy", "launcher.name=local", f"tracking.uri={tracking_uri}", "seeds=2"]
    assert run_sweep(compose(overrides), compose, overrides, out=io.StringIO()).finished == 2
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    noise = np.random.default_rng(0)
    with open(path, "r+b") as file:
        for page in range(path.stat().st_size // 4096):
            file.seek(page * 4096 + 100)  # every page, the file's header of page 1 kept
            file.write(noise.bytes(512))
    with pytest.raises(SystemExit) as done:
        run_or_exit(compose(overrides), compose, overrides)
    said = capsys.readouterr().err
    assert done.value.code == 3
    assert "its file is damaged, so runs it held may be lost" in said
    assert "Nothing was lost" not in said


def test_an_experiment_made_through_a_server_is_refused_on_its_database_directly(
    composer, tracking_uri
):
    """A driver on the database of an experiment a tracking server made (its artifacts at
    ``mlflow-artifacts:``, which only that server can reach) is refused, naming both ways
    out, instead of failing in its first read as a store that needs disk space; the lease
    it took is released, nothing is left RUNNING, and with the server's artifact
    destination given it runs."""
    MlflowClient(tracking_uri).create_experiment("served", artifact_location="mlflow-artifacts:/9")
    args = [f"tracking.uri={tracking_uri}", "experiment.name=served", "seeds=2", "horizon=5"]
    refusal = r"made through a tracking server: its artifacts \(mlflow-artifacts:/9\) .*"
    with pytest.raises(SweepError, match=refusal + r"\(tracking.artifacts_destination=DIR"):
        _sweep(composer, *args)
    assert not [r for r in _runs(tracking_uri) if r.info.status == "RUNNING"]
    served = Path(tracking_uri.removeprefix("sqlite:///")).parent / "served"
    done = _sweep(composer, *args, f"tracking.artifacts_destination={served}")
    assert done.finished == 2
    assert list((served / "9").glob("*/artifacts/*")), "no artifact in the server's destination"


def test_a_credential_in_the_description_is_not_recorded(composer, tracking_uri):
    """The experiment's description becomes the parent run's note (what MLflow's UI shows):
    a URI with a password written into it is recorded redacted, as config.yaml is."""
    text = "data from postgresql://ann:hunter22@db.lab/x; see ?token=abc123"
    _sweep(composer, f"tracking.uri={tracking_uri}", "seeds=1", "horizon=5",
           "experiment.name=described", f"experiment.description='{text}'")  # fmt: skip
    (parent,) = [r for r in _runs(tracking_uri) if r.data.tags.get("role") == "sweep"]
    note = parent.data.tags["mlflow.note.content"]
    assert "ann:***@db.lab" in note and "hunter22" not in note and "abc123" not in note
