"""Errors are caught where they are expected and nowhere else (issue #31, item 4): what a
store that is away raises is waited for or ignored in clean-up; a fault in the code is not
taken for one."""

from __future__ import annotations

import threading

import pytest

from sweeper.cells import Cell
from sweeper.execute import Outcome
from sweeper.progress import Progress
from sweeper.settings import same_database
from sweeper.store import mlflow_private, within
from sweeper.store.bulk import BulkWriter
from sweeper.store.lock import known_revision
from sweeper.store.mlflow_private import MlflowChanged
from sweeper.store.parent import SweepRun
from sweeper.store.record import Batching, Recorder, open_writer
from sweeper.store.tracking import Tracker


def test_clean_up_ignores_a_store_that_fails_and_reports_a_fault(monkeypatch):
    reported = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args.exc_type))

    def away():
        raise ConnectionRefusedError(111, "Connection refused")

    def fault():
        raise TypeError("a bug")

    within(5, away)
    within(5, fault)
    assert reported == [TypeError]


def test_a_fault_in_a_batch_is_not_dropped_when_the_recorder_closes(tracking_uri, monkeypatch):
    tracker = Tracker(tracking_uri, "fault")
    batching = Batching(database=tracking_uri, batch_size=2, patience_s=5)
    recorder = Recorder(tracker, SweepRun.open(tracker, "sweep", "{}"), batching, Progress(1),
                        open_writer(batching, tracker))  # fmt: skip

    def bug(self, records):
        raise TypeError("a bug in the writer")

    monkeypatch.setattr(BulkWriter, "write", bug)
    outcome = Outcome("FINISHED", result={"summary": {"total": 1.0}}, wall_s=0.01)
    recorder.add(Cell({"cell": "sweeper.toy.toy_cell", "seed": 0}), outcome, [])
    recorder.flush()  # handed to the writer thread
    with pytest.raises(TypeError, match="a bug in the writer"):
        recorder.close()


def test_an_mlflow_without_a_private_name_is_said_as_such_not_as_a_bad_database(
    tracking_uri, monkeypatch
):
    tracker = Tracker(tracking_uri, "changed")
    original = mlflow_private.get

    def changed(engine):
        raise MlflowChanged("this MLflow has no mlflow.store.db.utils._verify_schema")

    monkeypatch.setattr(
        mlflow_private, "get", lambda name: changed if name == "verify_schema" else original(name)
    )
    with pytest.raises(MlflowChanged, match="^this MLflow has no mlflow.store"):
        open_writer(Batching(database=tracking_uri), tracker)


def test_a_malformed_database_uri_is_another_database():
    assert same_database("postgresql://u@h:port/x", "postgresql://u@h:port/x")
    assert not same_database("postgresql://u@h:port/x", "postgresql://u@h:5432/x")
    assert not same_database("not a uri", "sqlite:///mlflow.db")


def test_a_schema_revision_this_mlflow_does_not_know_is_unknown():
    assert not known_revision("0123456789ab")
