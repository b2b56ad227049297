"""``python -m sweeper.report NAME [--out DIR] [--tracking-uri URI] [--baseline VALUE]
[--where KEY=V1,V2 ...] [--config-dir DIR]``, or ``python -m sweeper.report --from DIR``
(a published folder)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sweeper.configs import ConfigSearch
from sweeper.report import ReportError, build_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweeper.report",
        description="Tables (Markdown, CSV), figures (PNG) and index.html of an experiment "
        "read back from MLflow.",
    )
    parser.add_argument(
        "name", nargs="?", help="the experiment (MLflow experiment name), e.g. smoke"
    )
    parser.add_argument(
        "--out", help="output directory (default: reports/NAME; with --from, that folder)"
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="rebuild from the table a report folder published (DIR/sweep/), without the "
        "MLflow store, e.g. --from docs/results/ablation",
    )
    parser.add_argument(
        "--tracking-uri",
        help="the MLflow tracking URI (it wins over $MLFLOW_TRACKING_URI; default: that "
        "variable, else sqlite:///mlflow.db in the working directory)",
    )
    parser.add_argument(
        "--baseline",
        "--reference",
        dest="baseline",
        help="the option every paired comparison is against (default: the baseline the "
        "sweep ran with, else the experiment file's `baseline:`)",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="keep only the cells whose KEY (seed, a group, or a config path such as "
        "logged_data.beta0) is one of the values; repeatable (e.g. --where seed=0,1,2)",
    )
    parser.add_argument(
        "--config-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory of your own configs, as given to `sweeper --config-dir DIR`: its "
        "exp/NAME.yaml report section and task families are read before the shipped ones; "
        "repeatable",
    )
    args = parser.parse_args(argv)
    for directory in args.config_dir:
        if not Path(directory).expanduser().is_dir():
            parser.error(f"--config-dir {directory}: no such directory")
    if not args.name and not args.source:
        parser.error("give the experiment NAME, or --from DIR (a published report folder)")
    where = {}
    for item in args.where:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            parser.error(f"--where takes KEY=V1,V2,..., got '{item}'")
        where[key.strip()] = [v.strip() for v in values.split(",")]
    try:
        report = build_report(
            args.name or "",
            args.out or args.source,
            args.tracking_uri,
            args.baseline,
            configs=ConfigSearch.with_dirs(args.config_dir),
            where=where or None,
            source=args.source,
        )
    except ReportError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in report.notes:
        print(f"note: {note}")
    finished = len(report.cells) - report.failed
    print(
        f"report '{report.name}': {len(report.cells)} cells ({finished} finished, "
        f"{report.failed} failed), {len(report.tables)} tables, {len(report.figures)} figures"
    )
    if report.failed:
        print(f"  {report.failed} FAILED cell(s) are listed in {report.out / 'tables/failed.md'}")
    print(f"  open {report.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
