"""A cell's bad result fails that cell only (issue #41, item 2).

Before: a summary holding "abc", None or a nested dict stopped the whole sweep in the
driver's writer thread (``float(v)``: exit 2, no cell named, the batch unrecorded, the same
on every rerun); ``np.float32("nan")`` and the string "nan" were recorded FINISHED with a
NaN metric; a metric key MLflow's API refuses went into the database by the direct writes.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import _validate_metric_name, _validate_param_name

from sweeper.outcome import BadResult, Declared, check_result, key_problem
from sweeper.store.bulk import BulkWriter, RunRecord
from sweeper.store.tracking import Tracker
from sweeper.toy import BAD_KEY
from tests.test_orchestration import _cell_runs, _overrides, _sweep

KEYS = ["final_value", "a b", "a/b", "a:b", "a-b.c", "x" * 250, "x" * 251, BAD_KEY, "a/../b",
        "a/./b", "a//b", "/a", "a/", "..", ".", "", "../a", "a?", "a*", "ü", "a\tb", "a\nb",
        "ab..", "a..b", "a/..", "1"]  # fmt: skip


def _mlflow_refuses(key: str) -> bool:
    refused = []
    for validate in (_validate_metric_name, _validate_param_name):
        try:
            validate(key)
            if len(key) > 250:  # MLflow checks the length after the name (_validate_metric)
                raise MlflowException("too long")
        except MlflowException:
            refused.append(True)
        else:
            refused.append(False)
    assert refused[0] == refused[1]
    return refused[0]


@pytest.mark.parametrize("key", KEYS)
def test_the_workers_key_rule_is_mlflows(key):
    assert (key_problem(key) is not None) == _mlflow_refuses(key)


@pytest.mark.parametrize(
    ("value", "said"),
    [("abc", "'abc' (str), not a number"), (None, "None (NoneType), not a number"),
     ({"a": 1}, "{'a': 1} (dict), not a number"), ("nan", "'nan' (str), not a number"),
     (True, "True (bool), not a number"), (np.array([1.0]), "not a number")],
)  # fmt: skip
def test_a_summary_value_that_is_not_a_number_is_named_with_its_key(value, said):
    with pytest.raises(BadResult, match=r"summary\['final_value'\] is ") as caught:
        check_result({"summary": {"final_value": value, "ok": 1.0}}, "f", Declared(("ok",)))
    assert said in str(caught.value) and "'ok'" not in str(caught.value)


def test_nan_of_any_kind_is_a_diverged_cell():
    for value in (np.float32("nan"), np.float64("inf"), float("-inf")):
        with pytest.raises(FloatingPointError, match="not finite: final_value = "):
            check_result({"summary": {"final_value": value}}, "f")
    check_result({"summary": {"final_value": np.float32(1.5), "n": np.int64(3)}}, "f")


def test_a_declared_curve_must_be_numbers_and_an_undeclared_one_is_not_read():
    declared = Declared(("final_value",), ("value",))
    for bad in ("abc", [[1.0, 2.0]], [], ["a", "b"], {"x": 1}):
        with pytest.raises(BadResult, match=r"curves\['value'\] is"):
            check_result({"summary": {}, "curves": {"value": bad}}, "f", declared)
    check_result({"summary": {}, "curves": {"value": [1, 2.5], "other": "abc"}}, "f", declared)


def test_a_param_key_mlflow_refuses_is_named():
    with pytest.raises(BadResult, match=r"params key 'a/\.\./b' is one MLflow refuses"):
        check_result({"summary": {}, "params": {"a/../b": 1}}, "f")


@pytest.mark.parametrize("api", [False, True], ids=["direct", "api"])
def test_each_bad_result_fails_its_own_cell_and_the_others_are_recorded(
    composer, tracking_uri, api
):
    kinds = {1: "text", 2: "none", 3: "dict", 4: "float32_nan", 5: "nan_text", 6: "bad_key"}
    bad = ",".join(f"{seed}:{kind}" for seed, kind in kinds.items())
    extra = ["launcher.name=local", "seeds=8", f"+toy.bad_results={{{bad}}}"]
    overrides = _overrides(tracking_uri, "bad", *extra, f"tracking.direct_writes={not api}")
    result, out = _sweep(composer, overrides)
    assert result.finished == 2 and len(result.failed) == 6 and result.exit_code == 1, out
    reasons = {int(f.label.rsplit("seed", 1)[1]): f.error for f in result.failed}
    assert "summary['final_value'] is 'abc' (str), not a number" in reasons[1]
    assert "summary['final_value'] is None" in reasons[2]
    assert "summary['final_value'] is {'nested': 1.0} (dict)" in reasons[3]
    assert "not finite: final_value = np.float32(nan)" in reasons[4]
    assert "summary['final_value'] is 'nan' (str)" in reasons[5]
    assert f"summary key '{BAD_KEY}' is one MLflow refuses" in reasons[6]
    runs = _cell_runs(tracking_uri, "bad")
    status = {int(r.data.tags["seed"]): r.info.status for r in runs}
    assert status == {s: "FAILED" if s in kinds else "FINISHED" for s in range(8)}
    assert not [r for r in runs if BAD_KEY in r.data.metrics]


def _record(**fields) -> RunRecord:
    base = {"run_id": uuid.uuid4().hex, "name": "cell", "status": "FINISHED",
            "start_time": 1, "end_time": 2, "tags": {"cell_key": "k"}}  # fmt: skip
    return RunRecord(**{**base, **fields})


def test_the_direct_writes_refuse_a_key_as_mlflows_api_does(tracking_uri):
    tracker = Tracker(tracking_uri, "keys")
    writer = BulkWriter(tracking_uri, tracker.experiment_id, tracker.artifact_location)
    try:
        for record in (_record(metrics=[(BAD_KEY, 1.0, 0)]), _record(params={"a/../b": "1"})):
            with pytest.raises(MlflowException, match="Invalid value") as direct:
                writer.write([record, _record(metrics=[("fine", 1.0, 0)])])
            with pytest.raises(MlflowException) as api:
                tracker.client.log_batch(
                    tracker.client.create_run(tracker.experiment_id).info.run_id,
                    metrics=[_metric(k, v, s) for k, v, s in record.metrics],
                    params=[_param(k, v) for k, v in record.params.items()],
                )
            assert direct.value.error_code == api.value.error_code == "INVALID_PARAMETER_VALUE"
        assert not [r for r in tracker.runs() if r.data.tags.get("cell_key") == "k"]
        writer.write([_record(metrics=[("fine key/a:b", 1.0, 0)])])
        assert len(tracker.runs("tags.cell_key = 'k'")) == 1
    finally:
        writer.close()


def _metric(key, value, step):
    from mlflow.entities import Metric

    return Metric(key, value, 2, step)


def _param(key, value):
    from mlflow.entities import Param

    return Param(key, value)
