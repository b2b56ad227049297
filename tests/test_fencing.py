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
