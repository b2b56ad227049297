"""Where the data lives: the checkout's directory the README names, and the message a
submitted Ray job gets when its uploaded copy of the checkout has no data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sweeper_tasks import storage
from sweeper_tasks.storage import DATA_DIR_ENV, DatasetMissingError, default_data_dir

ROOT = Path(__file__).resolve().parents[1]


def test_a_clones_data_directory_is_the_one_the_readme_names(monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    readme = (ROOT / "README.md").read_text()
    named = re.search(r"else `([^`]+)` in the checkout", readme)
    assert named, "README.md no longer says where a checkout's data lives"
    assert default_data_dir() == ROOT / named.group(1).rstrip("/")
    assert default_data_dir() == ROOT / ".cache" / "datasets"


def test_the_environment_variable_wins(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert default_data_dir() == tmp_path


def _uploaded_copy(tmp_path: Path) -> Path:
    """A checkout as Ray unpacks a job's ``--working-dir`` on a node."""
    copy = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_1a2b"
    (copy / "tasks").mkdir(parents=True)
    (copy / "pyproject.toml").write_text("")
    return copy


def test_a_submitted_job_is_told_its_data_directory_is_the_uploaded_copy(monkeypatch, tmp_path):
    copy = _uploaded_copy(tmp_path)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setattr(storage, "__file__", str(copy / "tasks" / "storage.py"))
    assert default_data_dir() == copy / ".cache" / "datasets"
    message = str(DatasetMissingError("MovieLens 100K ratings not found."))
    assert message.startswith("MovieLens 100K ratings not found.")
    assert f"uploaded copy of your working directory ({copy})" in message
    assert f'"{DATA_DIR_ENV}"' in message and "env_vars" in message


@pytest.mark.parametrize("setting", ["checkout", "environment"])
def test_no_upload_note_elsewhere(monkeypatch, tmp_path, setting):
    if setting == "environment":
        monkeypatch.setattr(storage, "__file__", str(_uploaded_copy(tmp_path) / "tasks" / "x.py"))
        monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    else:
        monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert str(DatasetMissingError("missing.")) == "missing."
