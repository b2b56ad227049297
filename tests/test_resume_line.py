"""Every line the tool prints for the user to paste is the command as the user ran it
(sweeper/command.py): the interpreter that has the package, every flag and override quoted
for the shell, the directory, the environment a module of their own came from; and the
"did you mean" hint says how large the experiment it names is (issue 39, item 1)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper import command, slurm
from sweeper.errors import SweepError
from sweeper.overrides import check_command_line
from sweeper.ui import browse_hint

MY_TUNERS = '''\
"""A user's own tuner, found through PYTHONPATH."""

from sweeper_tasks.bandit_tuning.tuners.fixed import Fixed


class Mine(Fixed):
    """Fixed, under a module of the user's own."""
'''
MINE_TUNER = """\
_target_: my_tuners.Mine
name: mine
value: 2.0
values: {}
"""
MINE_EXP = """\
# @package _global_
experiment: {name: mine, description: a tuner of my own against Theory}
seeds: 3
horizon: 1500
sweep:
  grid: {algorithm: [linucb], tuner: [mine, theory], dataset: [simulation]}
"""
CELLS = 6
RESUME = re.compile(r"Resume \(only the missing cells run\) with:\n  (.+)\n")


def _setup(root: Path) -> None:
    (root / "mine").mkdir()
    (root / "mine" / "my_tuners.py").write_text(MY_TUNERS)
    for group, text in (("tuner", MINE_TUNER), ("exp", MINE_EXP)):
        (root / "my conf" / group).mkdir(parents=True, exist_ok=True)
        (root / "my conf" / group / "mine.yaml").write_text(text)


def _clean_env(**extra: str) -> dict[str, str]:
    drop = (*command.ENVIRONMENT, command.WRAPPER, "HYDRA_FULL_ERROR")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def _cell_runs(uri: str) -> list:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name("mine")
    runs = [] if found is None else client.search_runs([found.experiment_id], max_results=100)
    return [r for r in runs if "cell_key" in r.data.tags]


def _finished(uri: str) -> int:
    try:
        return sum(r.info.status == "FINISHED" for r in _cell_runs(uri))
    except Exception:  # the store is being created, or locked for a moment
        return 0


@pytest.mark.e2e
def test_the_printed_resume_line_resumes_a_config_dir_sweep_from_another_shell(tmp_path):
    """Interrupted with Ctrl-C, a sweep of the user's own tuner (a module on PYTHONPATH, an
    experiment in a --config-dir with a space in its name, a relative sqlite store) prints
    a line that, pasted verbatim into a shell elsewhere without PYTHONPATH, resumes it."""
    work = tmp_path / "project"
    work.mkdir()
    _setup(work)
    # cells one by one, each recorded as it ends: the signal lands mid-sweep
    args = ["--config-dir", "my conf", "+exp=mine", "launcher.name=local", "launcher.batch=1",
            "tracking.batch_size=1", "horizon=6000", "tracking.uri=sqlite:///intr.db"]  # fmt: skip
    uri = f"sqlite:///{work}/intr.db"
    driver = subprocess.Popen(
        [sys.executable, "-m", "sweeper", *args], cwd=work, env=_clean_env(PYTHONPATH="mine"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while _finished(uri) < 1:
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "no cell finished in 240 s"
            time.sleep(0.2)
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 130, out[-2000:] + err[-2000:]
    before = _finished(uri)
    assert 1 <= before < CELLS, out[-2000:]
    line = RESUME.search(out)[1]
    assert "PYTHONPATH=mine" in line and "--config-dir 'my conf'" in line, line
    assert shlex.split(line)[4] == sys.executable, line  # cd DIR && PYTHONPATH=.. PYTHON
    assert "my_tuners came from it" in out  # the note says why PYTHONPATH is part of it

    resumed = subprocess.run(
        ["bash", "-c", line], cwd="/", env=_clean_env(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"{CELLS} cells, {before} already finished, {CELLS - before} to run" in resumed.stdout
    assert f"{CELLS - before} finished, 0 failed, {before} skipped" in resumed.stdout
    runs = _cell_runs(uri)
    finished = Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == CELLS and set(finished.values()) == {1}  # exactly once
    assert {r.data.tags["tuner"] for r in runs} == {"mine", "theory"}


def test_the_command_is_the_interpreter_and_every_word_as_typed(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(command.WRAPPER, raising=False)
    for name in command.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SWEEPER_DATA_DIR", "/data/sets")
    typed = ["python", "-X", "dev", "-m", "sweeper", "--config-dir", "my conf", "+exp=mine",
             "experiment.description='a b'",
             "tracking.database=postgresql://bob:s3cret@db/m"]  # fmt: skip
    line = command._started(typed).shell()
    assert shlex.split(line) == [
        "cd",
        str(tmp_path),
        "&&",
        "SWEEPER_DATA_DIR=/data/sets",
        sys.executable,
        *typed[1:-1],
        "tracking.database=postgresql://bob:***@db/m",
    ]
    script = tmp_path / "bin" / "sweeper"  # a console script, as pip writes it
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    line = command._started([sys.executable, str(script), "+exp=smoke"]).shell()
    assert line.endswith(f"&& SWEEPER_DATA_DIR=/data/sets {script} +exp=smoke")


def test_a_wrapper_says_how_to_run_it_again(monkeypatch):
    monkeypatch.setenv(command.WRAPPER, "sbatch /home/me/main.sbatch")
    assert command.resume_lines(["+exp=main"]) == "  sbatch /home/me/main.sbatch"


def test_the_slurm_script_resubmits_itself_and_keeps_pythonpath(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/home/me/mine")
    recipe = slurm.Recipe(["--config-dir", "my conf", "+exp=mine"], "http://h:5000",
                          workdir=str(tmp_path))  # fmt: skip
    path = slurm.write(recipe, tmp_path / "my job.sbatch")
    lines = path.read_text().splitlines()
    assert "export PYTHONPATH=/home/me/mine" in lines
    (wrapper,) = [x for x in lines if x.startswith(f"export {command.WRAPPER}=")]
    echoed = subprocess.run(
        ["bash", "-c", f'{wrapper}\nprintf "%s" "${command.WRAPPER}"'],
        capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert shlex.split(echoed) == ["sbatch", str(path)]


def test_the_mlflow_ui_command_is_the_packages_own_mlflow(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    hint = browse_hint("sqlite:///mlflow.db", "3")
    serve = re.search(r"with\n    (.+)\n  then open (\S+)", hint)
    assert shlex.split(serve[1]) == [
        "cd",
        str(tmp_path),
        "&&",
        str(Path(sys.executable).parent / "mlflow"),
        "ui",
        "--backend-store-uri",
        "sqlite:///mlflow.db",
    ]
    assert serve[2].startswith("http://127.0.0.1:5000/#/experiments/3/runs")
    assert browse_hint("http://u:pw@h:5000", "3").startswith("open http://u:***@h:5000/")


def test_did_you_mean_says_how_large_the_experiment_it_names_is():
    with pytest.raises(SweepError) as refused:
        check_command_line(["+exp=mian"])
    assert "did you mean 'main' (a grid of 1,120 cells)?" in str(refused.value)
