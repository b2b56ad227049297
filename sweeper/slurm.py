"""``sweeper-slurm`` (or ``python -m sweeper.slurm``): a sweep on Ray inside a Slurm allocation.

Writes a batch script for ``sbatch`` (and, with ``--submit``, submits it) that, as Ray's
"Deploying on Slurm" guide does, starts a Ray head on the allocation's first node and a
worker on each other node (``srun``, one step per node), with a token of its own for Ray's
token authentication; waits until every node has joined (:mod:`sweeper.slurm_ray`); runs
the sweep driver on the head; and stops its Ray at the end by ending those steps (never
``ray stop``, which would also stop every other Ray of the user on the node). Example::

    sweeper-slurm --nodes 4 --cpus-per-node 32 --time 12:00:00 \\
        --tracking-uri http://login1:5000 --out main.sbatch --submit -- +exp=main

The sweep's store is the tracking server (``make tracking-server`` on a login or service
node; ``--database`` for the driver's direct writes into its PostgreSQL). Submitting the
same file again resumes the sweep: the cells with a FINISHED run are skipped. The script
asks Slurm for ``--signal=B:TERM@120``: two minutes before the time limit the batch shell
gets SIGTERM and passes it to the driver, which cancels the cells in flight, records the
finished ones and ends the sweep's parent run KILLED, well before Slurm's SIGKILL. ``scancel``
stops it the same way. docs/slurm.md has the whole recipe.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.command import WRAPPER
from sweeper.nfs import warn_network_sqlite

STOP_SIGNAL = "B:TERM@120"
"""``sbatch --signal``: SIGTERM to the batch shell alone, 120 s before the time limit."""

JOIN_TIMEOUT_S = 300
"""How long the script waits for every node's Ray to join before it gives up (exit 1)."""


@dataclass
class Recipe:
    """What the batch script needs: the sweep (``overrides``), the allocation, the store,
    the data, and where the package's Python is."""

    overrides: list[str]
    tracking_uri: str
    nodes: int = 1
    cpus_per_node: int | None = None  # None: the whole node (--exclusive)
    time: str = "01:00:00"
    job_name: str = "sweeper"
    database: str | None = None
    artifacts: str | None = None
    data_dir: str | None = None
    python: str = sys.executable
    workdir: str = field(default_factory=os.getcwd)
    partition: str | None = None
    account: str | None = None
    sbatch: list[str] = field(default_factory=list)
    script: str | None = None  # where the script is written (said in its resume hint)
    pythonpath: str | None = field(default_factory=lambda: os.environ.get("PYTHONPATH"))

    def directives(self) -> list[str]:
        """The ``#SBATCH`` lines."""
        lines = [
            f"--job-name={self.job_name}",
            f"--nodes={self.nodes}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={self.cpus_per_node}" if self.cpus_per_node else "--exclusive",
            f"--time={self.time}",
            f"--output={Path(self.workdir) / self.job_name}-%j.out",
            f"--signal={STOP_SIGNAL}",
        ]
        lines += [f"--partition={self.partition}"] if self.partition else []
        lines += [f"--account={self.account}"] if self.account else []
        return [f"#SBATCH {line}" for line in lines + list(self.sbatch)]

    def sweep_overrides(self) -> list[str]:
        """The driver's overrides: the user's, then the store's."""
        extra = [f"tracking.database={self.database}"] if self.database else []
        extra += [f"tracking.artifacts_destination={self.artifacts}"] if self.artifacts else []
        return [*self.overrides, *extra]


def ray_command(python: str) -> str:
    """The ``ray`` console script of the package's environment (next to its Python)."""
    beside = Path(python).parent / "ray"
    found = str(beside) if beside.exists() else shutil.which("ray")
    if not found:
        raise SystemExit(
            f"error: no `ray` command next to {python} nor on PATH: install the package "
            "(pip install sweeper, or `make .venv/.installed` in a checkout) into that Python"
        )
    return found


BODY = r"""
set -u
stop=0
trap 'stop=1' TERM INT  # a stop before the driver runs: no sweep (the driver takes it after)
cd {workdir}
PY={python}
RAY={ray}
{data_line}
export MLFLOW_TRACKING_URI={tracking_uri}
export PYTHONUNBUFFERED=1
{env_lines}
# Ray's token authentication (Ray 2.52 and later; an older Ray says it has none and starts
# without): every node of this job gets the same token through srun's environment (a fresh
# one per job unless $RAY_AUTH_TOKEN is set when submitting).
if "$PY" -m sweeper.slurm_ray token-auth; then
  export RAY_AUTH_MODE=token
  token=$("$PY" -c 'import secrets; print(secrets.token_hex(32))')
  export RAY_AUTH_TOKEN="${{RAY_AUTH_TOKEN:-$token}}"
fi
OVERRIDES=({overrides})
RAY_TMP=/tmp/sweeper-ray-$SLURM_JOB_ID  # its own: no other Ray's ray_current_cluster

nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
head_ip=$("$PY" -m sweeper.slurm_ray head-ip "${{nodes[0]}}")
cpus=${{SLURM_CPUS_PER_TASK:-$SLURM_CPUS_ON_NODE}}
steps=()
stop_ray() {{  # end this job's Ray steps: srun, signalled, kills its step (SIGKILL)
  kill -TERM "${{steps[@]}}" 2>/dev/null
  wait "${{steps[@]}}" 2>/dev/null
  rm -rf "$RAY_TMP"
}}
# The head's ports are chosen free just before it binds them; a head that exits before it
# answers (a port taken meanwhile) is started again on other ports (wait's exit status 3).
for attempt in 1 2 3; do
  head_flags=$("$PY" -m sweeper.slurm_ray flags --head)
  address=$head_ip:$(sed -E 's/^--port=([0-9]+).*/\1/' <<<"$head_flags")
  echo "sweeper-slurm: Ray head on ${{nodes[0]}} ($address), ${{#nodes[@]}} node(s) of $cpus CPUs"
  srun --nodes=1 --ntasks=1 --overlap -w "${{nodes[0]}}" "$RAY" start --head --block \
    --node-ip-address="$head_ip" --num-cpus="$cpus" --temp-dir="$RAY_TMP" $head_flags &
  head_step=$!
  "$PY" -m sweeper.slurm_ray wait --address "$address" --nodes 1 --timeout {join_s} \
    --step $head_step
  joined=$?
  [ "$joined" -eq 3 ] || break
  wait $head_step 2>/dev/null
done
steps+=($head_step)
[ "$joined" -eq 0 ] || {{ stop_ray; exit 1; }}
for node in "${{nodes[@]:1}}"; do
  srun --nodes=1 --ntasks=1 --overlap -w "$node" bash -c "exec '$RAY' start --block \
    --address='$address' --num-cpus='$cpus' \$('$PY' -m sweeper.slurm_ray flags)" &
  steps+=($!)
done
if [ "${{#nodes[@]}}" -gt 1 ]; then
  "$PY" -m sweeper.slurm_ray wait --address "$address" --nodes "${{#nodes[@]}}" \
    --timeout {join_s} || {{ stop_ray; exit 1; }}
fi

# The driver runs here, on the head. SIGTERM (scancel; the time limit's --signal=B:TERM)
# is passed on to it: it cancels the cells in flight, keeps the finished ones and ends the
# sweep's parent run KILLED (exit status 130).
if [ "$stop" -eq 1 ]; then
  echo "sweeper-slurm: stopped before the sweep started; resubmit to run it: sbatch {script}"
  stop_ray
  exit 130
fi
"$PY" -m sweeper "${{OVERRIDES[@]}}" launcher.address="$address" &
driver=$!
trap 'kill -TERM $driver 2>/dev/null' TERM INT
while kill -0 $driver 2>/dev/null; do wait $driver; done
wait $driver; status=$?
trap - TERM INT
if [ "$status" -ne 0 ]; then
  echo "sweeper-slurm: the sweep ended with exit status $status; resubmit to resume" \
    "(finished cells are skipped): sbatch {script}"
fi
stop_ray
exit $status
"""


def render(recipe: Recipe) -> str:
    """The batch script's text."""
    script = recipe.script or "THIS_FILE"
    header = [
        "#!/bin/bash",
        *recipe.directives(),
        "#",
        "# A sweep on Ray inside this Slurm allocation, written by `sweeper-slurm`",
        "# (sweeper/slurm.py, docs/slurm.md). Submit with `sbatch`; submitting this file again",
        "# resumes the sweep (cells with a FINISHED run are skipped). --signal=B:TERM@120: 120 s",
        "# before the time limit Slurm sends SIGTERM to this script alone, which passes it on",
        "# to the driver, so it records its last cells and ends the parent run KILLED in time.",
    ]
    body = BODY.format(
        workdir=shlex.quote(recipe.workdir),
        python=shlex.quote(recipe.python),
        ray=shlex.quote(ray_command(recipe.python)),
        data_line=_data_line(recipe),
        env_lines=_env_lines(recipe, script),
        tracking_uri=shlex.quote(recipe.tracking_uri),
        overrides=" ".join(shlex.quote(o) for o in recipe.sweep_overrides()),
        join_s=JOIN_TIMEOUT_S,
        script=shlex.quote(script),
    )
    return "\n".join(header) + "\n" + body


def _data_line(recipe: Recipe) -> str:
    """Where the cells find the datasets: ``--data-dir``, else ``$SWEEPER_DATA_DIR``, else
    the working directory's ``.cache/datasets`` (a checkout's, where ``make movielens`` puts
    them) when it exists; else the cells' own default (tasks/storage.py)."""
    found = recipe.data_dir or os.environ.get("SWEEPER_DATA_DIR")
    cache = Path(recipe.workdir) / ".cache" / "datasets"
    if not found and cache.is_dir():
        found = str(cache)
    if not found:
        return "# no data directory given: the cells' default (--data-dir DIR to set one)"
    return f"export SWEEPER_DATA_DIR={shlex.quote(str(Path(found).expanduser().resolve()))}"


def _env_lines(recipe: Recipe, script: str) -> str:
    """The driver's resume line is this script's resubmission (``$SWEEPER_COMMAND``,
    sweeper/command.py), and the job sees the ``PYTHONPATH`` the script was written with
    (a user's own modules, on every node), whichever shell submits it again."""
    resubmit = f"sbatch {shlex.quote(script)}"
    lines = [f"export {WRAPPER}={shlex.quote(resubmit)}"]
    if recipe.pythonpath:
        lines.append(f"export PYTHONPATH={shlex.quote(recipe.pythonpath)}")
    return "\n".join(lines)


def write(recipe: Recipe, path: Path) -> Path:
    """Write the batch script to ``path`` (executable); its absolute path."""
    path = path.resolve()
    recipe.script = str(path)
    path.write_text(render(recipe))
    path.chmod(0o755)
    return path


def submit(path: Path) -> str:
    """``sbatch path``; the job id."""
    if shutil.which("sbatch") is None:
        raise SystemExit("error: sbatch is not on PATH: run this on a Slurm login node")
    done = subprocess.run(["sbatch", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: sbatch {path} failed: {(done.stderr or done.stdout).strip()}")
    found = re.search(r"(\d+)", done.stdout)
    return found.group(1) if found else done.stdout.strip()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sweeper-slurm",
        description="Write (and with --submit, submit) a Slurm batch script that runs a "
        "sweep on Ray inside the allocation (docs/slurm.md).",
        epilog="Example: sweeper-slurm --nodes 2 --time 2:00:00 --tracking-uri "
        "http://login1:5000 --out smoke.sbatch -- +exp=smoke",
    )
    add = parser.add_argument
    add("overrides", nargs="*", help="the sweep's Hydra overrides, after --: +exp=NAME ...")
    add("--out", type=Path, default=None, help="the script's file (default: <job-name>.sbatch)")
    add("--submit", action="store_true", help="also submit it with sbatch")
    add("--nodes", type=int, default=1, help="nodes of the allocation (default 1)")
    add("--cpus-per-node", type=int, default=None, help="CPUs per node (default: whole nodes)")
    add("--time", default="01:00:00", help="the time limit (sbatch --time; default 01:00:00)")
    add("--job-name", default=None, help="default: sweeper-<experiment>")
    add("--partition", default=None)
    add("--account", default=None)
    add(
        "--sbatch",
        action="append",
        default=[],
        metavar="OPTION",
        help="another sbatch option for the script, e.g. --sbatch=--mem=64G (repeatable)",
    )
    add(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI"),
        help="the MLflow tracking server (default: $MLFLOW_TRACKING_URI)",
    )
    add("--database", default=None, help="its database, for direct writes (tracking.database)")
    add("--artifacts", default=None, help="its artifact root (tracking.artifacts_destination)")
    add(
        "--data-dir",
        default=None,
        help="the datasets, at the same path on every node (default: $SWEEPER_DATA_DIR, "
        "else WORKDIR/.cache/datasets if it exists)",
    )
    add("--python", default=sys.executable, help="the Python the package is installed in")
    add("--workdir", default=os.getcwd(), help="the job's working directory (default: here)")
    return parser


def _experiment(overrides: list[str]) -> str:
    for override in overrides:
        if override.startswith("+exp="):
            return override.split("=", 1)[1]
    return "adhoc"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.tracking_uri:
        raise SystemExit(
            "error: a sweep on Slurm records into a tracking server: give --tracking-uri "
            "http://HOST:PORT (start one with `make tracking-server` on a login or service "
            "node, docs/slurm.md), or export MLFLOW_TRACKING_URI"
        )
    if args.nodes < 1:
        raise SystemExit(f"error: --nodes must be at least 1, got {args.nodes}")
    warn_network_sqlite(args.tracking_uri, args.database)
    name = args.job_name or f"sweeper-{_experiment(args.overrides)}"
    recipe = Recipe(
        overrides=list(args.overrides),
        tracking_uri=args.tracking_uri,
        nodes=args.nodes,
        cpus_per_node=args.cpus_per_node,
        time=args.time,
        job_name=name,
        database=args.database,
        artifacts=args.artifacts,
        data_dir=args.data_dir,
        python=args.python,
        workdir=str(Path(args.workdir).resolve()),
        partition=args.partition,
        account=args.account,
        sbatch=list(args.sbatch),
    )
    path = write(recipe, args.out or Path(f"{name}.sbatch"))
    print(f"wrote {path}; submit it (again, to resume) with: sbatch {shlex.quote(str(path))}")
    if args.submit:
        print(f"submitted batch job {submit(path)}; its output: {recipe.workdir}/{name}-<job>.out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
