"""A driver that lost the experiment writes nothing more (issue #27, item 1): the fencing
token is checked by every batch, in the batch's own transaction when it goes into the
database; and runs never go into a database that is not the tracking store's own."""

from __future__ import annotations

import shutil
import time

import pytest

from sweeper.errors import SweepError
from sweeper.store.bulk import BulkWriter, RunRecord
from sweeper.store.lock import Fence, Lease, LeaseLost
from sweeper.store.record import Batching, open_writer
from sweeper.store.tracking import Tracker


def _record(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, name="cell", status="FINISHED", start_time=1, end_time=2,
                     tags={"cell_key": run_id[:8]}, metrics=[("final_value", 1.0, 0)])  # fmt: skip


def _cell_runs(tracker: Tracker) -> list:
    return tracker.runs("tags.cell_key != ''")


def test_a_paused_driver_whose_lease_was_taken_over_writes_no_batch(tracking_uri):
    tracker = Tracker(tracking_uri, "fenced")
    client, experiment = tracker.client, tracker.experiment_id
    database = tracking_uri  # a server's database, here the same sqlite file
    first = Lease(client, experiment, "host-a:1:1", "a", heartbeat_s=0.1, expiry_s=1.0)
    first.acquire()
    fence_a = Fence(client, experiment, "host-a:1:1", first)
    fence_a.claim()
    writer = BulkWriter(database, experiment, tracker.artifact_location)
    writer.fence = fence_a
    writer.write([_record("a" * 32)])  # it holds the lease: the batch goes in
    fence_a.check()
    first._stop.set()  # paused (as SIGSTOP would): no heartbeat any more
    first._thread.join()
    time.sleep(1.1)
    second = Lease(client, experiment, "host-b:2:1", "b", expiry_s=1.0)
    second.acquire()  # the first one's heartbeat is older than the expiry: it is dead
    Fence(client, experiment, "host-b:2:1", second).claim()
    with pytest.raises(LeaseLost, match=r"lost the experiment to another driver \(host-b:2:1\)"):
        writer.write([_record("b" * 32)])
    with pytest.raises(LeaseLost, match="lost the experiment to another driver"):
        fence_a.check()  # through the API: its lease was ended by the other driver
    assert [r.info.run_id for r in _cell_runs(tracker)] == ["a" * 32]
    second.release()
    writer.close()


def test_a_lease_silent_past_its_margin_is_checked_before_it_goes_on(tracking_uri):
    tracker = Tracker(tracking_uri, "silent")
    lease = Lease(tracker.client, tracker.experiment_id, "host-a:1:1", "a", 0.1, 1.0)
    lease.acquire()
    lease._stop.set()
    lease._thread.join()
    time.sleep(0.95)  # past expiry minus one heartbeat (a server away, a pause)
    lease.check()  # still its own: renewed
    assert time.monotonic() - lease.beaten < 0.5
    time.sleep(0.95)
    tracker.client.set_terminated(lease.run_id, "KILLED")  # another driver took it over
    with pytest.raises(LeaseLost, match="silent"):
        lease.check()
    lease.release()


def test_runs_never_go_into_a_database_that_is_not_the_stores_own(tracking_uri, tmp_path):
    other = tmp_path / "other.db"
    shutil.copyfile(tracking_uri.removeprefix("sqlite:///"), other)
    Tracker(f"sqlite:///{other}", "someone-else")  # experiment id 1 there: another name
    tracker = Tracker(tracking_uri, "mine")
    batching = Batching(database=f"sqlite:///{other}")
    with pytest.raises(SweepError, match=r"is not the database of the tracking store .*'someo"):
        open_writer(batching, tracker)
    open_writer(Batching(database=tracking_uri), tracker).close()  # its own: fine


# --- issue #41, item 1: the fence through MLflow's API --------------------------------


class _Quiet:
    def message(self, text: str) -> None:  # noqa: ARG002 - nothing to show in a test
        return None


def _api_batch(tracker: Tracker, cells: int = 3):
    """Driver host-a's lease (its heartbeat every 0.1 s, dead after 1 s) and fence, its
    recorder writing through MLflow's API, and a batch of ``cells`` runs it has written
    whole but not committed."""
    from sweeper.store.parent import SweepRun
    from sweeper.store.record import Recorder

    lease = Lease(tracker.client, tracker.experiment_id, "host-a:1:1", "a", 0.1, 1.0)
    lease.acquire()
    fence = Fence(tracker.client, tracker.experiment_id, "host-a:1:1", lease)
    fence.claim()
    parent = SweepRun.open(tracker, "s" * 64, "config: 1\n")
    recorder = Recorder(tracker, parent, Batching(database=None), _Quiet(), None, fence)
    records = [_record(f"{i:032x}") for i in range(cells)]
    for record in records:
        record.tags["sweeper.driver"] = fence.driver
    recorder._each(recorder._log, records)
    assert {r.info.status for r in _cell_runs(tracker)} == {"RUNNING"}  # written, uncommitted
    return lease, fence, recorder, records


def _taken_over(tracker: Tracker, lease: Lease) -> None:
    """``lease``'s driver is paused past its expiry; a driver of another host takes the
    experiment over, as SweepStore.open and .done do: lease, token, retraction."""
    from sweeper.store.settle import retract

    lease._stop.set()
    lease._thread.join()
    time.sleep(1.1)
    second = Lease(tracker.client, tracker.experiment_id, "host-b:2:1", "b", expiry_s=1.0)
    second.acquire()
    Fence(tracker.client, tracker.experiment_id, "host-b:2:1", second).claim()
    assert len(retract(tracker)) == 3
    second.release()


def test_a_batch_through_the_api_is_committed_only_while_its_driver_holds_it(tracking_uri):
    """Before: through the API the token was checked once, before a batch; a driver paused
    in the middle of a batch went on writing FINISHED runs after losing the lease."""
    lease, _, recorder, records = _api_batch(Tracker(tracking_uri, "api-fenced"))
    tracker = recorder.tracker
    _taken_over(tracker, lease)
    with pytest.raises(LeaseLost, match=r"to another driver \(host-b:2:1\): its lease went"):
        recorder._commit(records)
    assert not _cell_runs(tracker)  # retracted, and nothing committed


def test_a_commit_that_lands_after_the_takeover_fails_on_the_retracted_run(
    tracking_uri, monkeypatch
):
    """The driver checked the token, then was paused before its commit: the runs it
    commits were deleted by the driver that took over, and MLflow refuses to change them."""
    lease, fence, recorder, records = _api_batch(Tracker(tracking_uri, "api-late"))
    tracker = recorder.tracker
    checks, real = [], fence.check

    def passes_once() -> None:  # the first check passed, before the pause
        checks.append(1)
        if len(checks) > 1:
            real()

    monkeypatch.setattr(fence, "check", passes_once)
    _taken_over(tracker, lease)  # after the check that passed, before the commit
    with pytest.raises(LeaseLost, match=r"lost the experiment to another driver"):
        recorder._commit(records)
    assert not _cell_runs(tracker) and not [r for r in records if r.written]
