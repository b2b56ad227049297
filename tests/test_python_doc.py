"""docs/python.md runs as written, and its numbers are the report's (issue #38, item 4).

The page's Python blocks run in order in an empty directory (as a user's script or
notebook); an epilogue of this test's own then saves the frames they made, and the report
of the same sweep, built by the command line, must hold the same numbers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
EPILOGUE = """
import json as _json
results.compare().to_csv("compare.csv", index=False)
mine.to_csv("mine.csv", index=False)
results.cells.to_csv("cells_api.csv", index=False)
_json.dump({"published_cells": len(published.cells), "published_baseline": published.baseline,
            "decisions": len(smoke.decisions)}, open("facts.json", "w"))
"""


def _blocks() -> list[str]:
    page = (ROOT / "docs" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", page, re.S)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.pop("PYTHONPATH", None)
    return env


@pytest.mark.e2e
def test_the_python_page_runs_and_its_numbers_are_the_reports(tmp_path):
    script = tmp_path / "walkthrough.py"
    script.write_text("\n".join(_blocks()) + EPILOGUE)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_clean_env(), capture_output=True,
        text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, textwrap.shorten(done.stdout + done.stderr, 4000)
    assert re.search(r"^0 15 0$", done.stdout, re.M), done.stdout[-3000:]  # as the page says
    assert (tmp_path / "regret.png").stat().st_size > 10_000
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts == {"published_cells": 1120, "published_baseline": "cdt", "decisions": 4}

    report = subprocess.run(
        [sys.executable, "-m", "sweeper.report", "mine", "--config-dir", "my_conf",
         "--tracking-uri", "sqlite:///mlflow.db", "--out", "report"],
        cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    paired = pd.read_csv(tmp_path / "report" / "tables" / "paired.csv")
    api = pd.read_csv(tmp_path / "compare.csv")
    assert list(paired["tuner"]) == list(api["tuner"]) == ["epsilon_greedy", "cdt"]
    assert set(paired["baseline"]) == {"op"} and set(paired["baseline_label"]) == {"OP"}
    for column in ("difference", "ci_low", "ci_high", "p_wilcoxon", "p_holm", "n_pairs"):
        np.testing.assert_array_equal(paired[column].to_numpy(), api[column].to_numpy())
    # the report's cells.csv joins the API's cells on the raw names
    cells = pd.read_csv(tmp_path / "report" / "cells.csv")
    joined = cells.merge(pd.read_csv(tmp_path / "cells_api.csv"), on=["cell_key", "tuner"])
    assert len(joined) == 15
    np.testing.assert_array_equal(joined["final_regret_x"], joined["final_regret_y"])
    # yours as the baseline, "baseline - option": yours minus OP, the same number as the
    # report's epsilon_greedy row against OP (epsilon_greedy minus OP), with its interval
    mine = pd.read_csv(tmp_path / "mine.csv").set_index("tuner")
    assert set(mine["sign"]) == {"baseline - tuner"} and set(mine["baseline"]) == {"epsilon_greedy"}
    theirs = api.set_index("tuner").loc["epsilon_greedy"]
    for column in ("difference", "ci_low", "ci_high", "p_wilcoxon"):
        assert np.isclose(mine.loc["op", column], theirs[column], rtol=1e-12, atol=0), column
