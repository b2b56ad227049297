"""A sweep's parent run: its config, its table of cells, its summary and its end
(docs/architecture.md, "The MLflow layout").

One parent run per sweep (tags ``sweep_key`` and ``role=sweep``), reused when the same sweep
starts again. It holds ``config.yaml``, the sweep's table (:mod:`sweeper.store.table`: parts
under ``cells/`` while it runs, ``cells.parquet`` once consolidated) with its tags
``table_until`` and ``table_runs``, and at its end ``summary.json`` and the summary as tags.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import pandas as pd

from sweeper.errors import StoreBusy
from sweeper.process import driver_alive, now_ms
from sweeper.provenance import LIBRARIES_TAG, changed_libraries, code_tags, installed_libraries
from sweeper.store.failures import STORE_ERRORS
from sweeper.store.table import CellTable
from sweeper.store.tracking import TABLE_RUNS, Tracker, number_or_none
from sweeper.uri import redact

SUMMARY_TAG = "sweep."
"""The prefix of the parent's tags that hold the sweep's summary (``sweep.cells``, ...)."""


class SweepRun:
    """The parent run ``run_id`` of a sweep in ``tracker``'s experiment.

    Attributes
    ----------
    library_change : str
        How the libraries installed now differ from those of the sweep's earlier start
        (empty when they do not, or when the sweep is new).
    """

    def __init__(self, tracker: Tracker, run_id: str) -> None:
        self.tracker, self.run_id = tracker, run_id
        self.library_change = ""
        self._table_runs: int | None = None  # its tag TABLE_RUNS, as written

    @classmethod
    def open(
        cls, tracker: Tracker, sweep_key: str, config_yaml: str, description: str = ""
    ) -> SweepRun:
        """The sweep's parent run, reused (and set RUNNING) when the same sweep is started
        again, else created with ``config_yaml``.

        Refuses to drive a sweep whose parent is RUNNING under another live process on this
        host (the same sweep started twice).
        """
        found = tracker.runs(f"tags.sweep_key = '{sweep_key}'")
        if found:
            run = max(found, key=lambda r: r.info.start_time)
            _refuse_a_second_driver(run, tracker.driver)
            parent = cls(tracker, run.info.run_id)
            now = installed_libraries()
            parent.library_change = changed_libraries(run.data.tags.get(LIBRARIES_TAG), now)
            parent.set_tags({"sweeper.driver": tracker.driver, **code_tags(), LIBRARIES_TAG: now})
            tracker.client.update_run(parent.run_id, status="RUNNING")
            return parent
        run = tracker.client.create_run(
            tracker.experiment_id,
            run_name=f"sweep-{sweep_key[:8]}",
            tags={
                "sweep_key": sweep_key,
                "role": "sweep",
                "mlflow.note.content": redact(description),  # a user's text may hold a URI
                "sweeper.driver": tracker.driver,
                LIBRARIES_TAG: installed_libraries(),
                **code_tags(),
            },
        )
        tracker.write_artifact(
            run.info.run_id, "config.yaml", config_yaml.encode(), run.info.artifact_uri
        )
        return cls(tracker, run.info.run_id)

    @property
    def table(self) -> CellTable:
        return self.tracker.table(self.run_id)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.tracker.set_tags(self.run_id, tags)

    def append(
        self,
        rows: pd.DataFrame | list[dict[str, Any]],
        until: int | None = None,
        move_mark: bool = True,
    ) -> None:
        """Append ``rows`` to the table as a part; then move its ``table_until`` mark
        (``move_mark``): every cell run of this parent that ended before ``until`` (ms,
        default now) is in the table. The tag ``table_runs`` counts the runs ever written
        into the table: a table that holds fewer (a part lost or damaged) is not trusted
        (:func:`sweeper.store.table.holds`) and its runs are searched instead."""
        until = now_ms() if until is None else int(until)
        records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
        if not records and not move_mark:
            return
        self.table.append(records)
        count = self.table_runs() + len({r.get("run_id") for r in records})
        tags = {TABLE_RUNS: str(count)}
        if move_mark:
            tags["table_until"] = str(until)
        self.set_tags(tags)
        self._table_runs = count

    def table_runs(self) -> int:
        """How many runs were ever written into the table (its tag ``table_runs``)."""
        if self._table_runs is None:
            tag = self.tracker.client.get_run(self.run_id).data.tags.get(TABLE_RUNS)
            self._table_runs = int(number_or_none(tag) or 0)
        return self._table_runs

    def rows(self, columns: list[str] | None = None) -> pd.DataFrame | None:
        """Every row of the table (each run once), or None when it has none (a file that
        cannot be read is skipped, and said: the runs rebuild its rows)."""
        return self.table.read(columns)

    def finish(
        self,
        summary: Mapping[str, float],
        failed: bool,
        status: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Log the sweep's summary (tags ``sweep.<name>``, and ``summary.json``) and end the
        run: ``status``, else FAILED when ``failed``, else FINISHED. Tags, not metrics: the
        sweep's bookkeeping (cells, failed, cells_per_s) stays off the charts of the cells'
        metrics in MLflow's UI."""
        self.set_tags({f"{SUMMARY_TAG}{k}": _text(float(v)) for k, v in summary.items()})
        if details is not None:
            data = json.dumps(details, indent=2, default=str).encode()
            self.tracker.write_artifact(self.run_id, "summary.json", data)
        self.tracker.client.set_terminated(
            self.run_id, status or ("FAILED" if failed else "FINISHED")
        )

    def settle(self, status: str) -> None:
        """End the run of a sweep that stopped abnormally; best effort (the store itself
        may be what failed: then the next start settles it)."""
        with suppress(*STORE_ERRORS):  # nothing more to do; the original error follows
            self.tracker.client.set_terminated(self.run_id, status)


def _text(value: float) -> str:
    """A summary value as a tag: 1120, 306.12 (six significant digits)."""
    return str(int(value)) if value.is_integer() else f"{value:.6g}"


def _refuse_a_second_driver(run: Any, driver: str) -> None:
    """:class:`StoreBusy` when the sweep's parent ``run`` is RUNNING under another live
    process on this host."""
    other = run.data.tags.get("sweeper.driver")
    if run.info.status == "RUNNING" and other != driver and driver_alive(other) is True:
        pid = other.split(":")[1]
        raise StoreBusy(
            f"this sweep is already running in process {pid} on this host; wait for it to "
            f"finish or stop it (kill -INT {pid}), then run the command again"
        )
