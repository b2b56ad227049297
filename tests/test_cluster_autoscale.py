"""A queued sweep makes the cluster scale up, and it scales down after (slow: ~2 min here).

``cluster.yaml`` needs AWS, but Ray's fake multi-node provider (``type: fake_multinode``,
started with ``RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config=...``) runs the real
autoscaler against "nodes" that are local ``ray start`` processes. The config is
``cluster.yaml``'s own: its worker node type (its name and ``max_workers``, capped to two for
this machine) and its autoscaling settings, with the resources AWS would read from the
instance types given explicitly (a worker: 1 CPU) and a head without CPUs, so that every cell
needs a worker. A sweep of toy cells joins the cluster by address; ``ray status`` is polled
while it runs and after. Everything is stopped by pid at the end (the processes naming this
test's own ``--temp-dir``), never with a broad ``ray stop``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.test_cluster_submit import _free_port, _stop_ray, _wait, node_ports

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HEAD_TYPE = "ray.head.default"  # the fake provider's fixed name for the head's node type
IDLE_MINUTES = 0.25
pytestmark = pytest.mark.slow


def fake_config(gcs_address: str) -> dict:
    """``cluster.yaml`` for the fake multi-node provider (see the module docstring)."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    (worker_type,) = [n for n in config["available_node_types"] if n != config["head_node_type"]]
    worker = config["available_node_types"][worker_type]
    max_workers = min(2, worker["max_workers"], config["max_workers"])
    return {
        "cluster_name": config["cluster_name"],
        "max_workers": max_workers,
        "upscaling_speed": config["upscaling_speed"],
        "idle_timeout_minutes": IDLE_MINUTES,  # cluster.yaml: 10; a test cannot wait that long
        "provider": {
            "type": "fake_multinode",
            "gcs_address": gcs_address,
            "disable_launch_config_check": True,
            "disable_node_updaters": True,  # no SSH: the provider starts the raylets itself
            "use_node_id_as_ip": True,  # the nodes share this machine's IP
        },
        "auth": {"ssh_user": "ubuntu"},
        "available_node_types": {
            HEAD_TYPE: {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
            worker_type: {
                "resources": {"CPU": 1},
                "node_config": {},
                "min_workers": worker.get("min_workers", 0),
                "max_workers": max_workers,
            },
        },
        "head_node_type": HEAD_TYPE,
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def _worker_nodes(env: dict[str, str], address: str) -> int | None:
    """Worker nodes ``ray status`` lists (active or idle; None when it cannot tell)."""
    done = subprocess.run(
        [str(BIN / "ray"), "status", f"--address={address}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    nodes = re.search(r"Node status\n-+\n(.*?)\nPending:", done.stdout, re.S)
    if nodes is None:
        return None
    counts = re.findall(r"^\s*(\d+)\s+(\S+)\s*$", nodes.group(1), re.M)
    return sum(int(n) for n, kind in counts if kind != HEAD_TYPE)


def test_a_queued_sweep_scales_the_cluster_up_and_it_scales_down_after(tmp_path, tracking_uri):
    from ray._private.services import get_node_ip_address

    temp_dir = Path(tempfile.mkdtemp(prefix="rta", dir="/tmp"))  # short: Ray's socket paths
    port = _free_port()
    address = f"{get_node_ip_address()}:{port}"
    config = fake_config(address)
    from ray.autoscaler._private.util import validate_config

    validate_config(config)
    config_file = tmp_path / "fake-cluster.yaml"
    config_file.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
    ports = f"--dashboard-port={_free_port()} {node_ports(head=True)}"
    seen: list[tuple[float, int | None]] = []
    sweep = None
    try:
        head = subprocess.run(
            f"RAY_FAKE_CLUSTER=1 {BIN}/ray start --head --port={port} --num-cpus=0 "
            f"--autoscaling-config={config_file} --temp-dir={temp_dir} {ports}",
            shell=True,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert head.returncode == 0, head.stdout[-2000:] + head.stderr[-3000:]
        first = _wait(lambda: _worker_nodes(env, address) is not None, 60, "ray status")
        assert first and _worker_nodes(env, address) == 0, "the cluster starts with the head alone"

        sweep = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sweeper",
                "task=toy",
                "horizon=20",
                "seeds=8",
                "+toy.sleep_s=4",
                "experiment.name=autoscale",
                f"tracking.uri={tracking_uri}",
                f"launcher.address={address}",
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started = time.monotonic()
        while sweep.poll() is None and time.monotonic() - started < 600:
            seen.append((time.monotonic() - started, _worker_nodes(env, address)))
            time.sleep(2)
        output = sweep.communicate(timeout=60)[0]
        assert sweep.returncode == 0, output[-4000:]
        during = max((n or 0) for _, n in seen)
        assert during >= 1, f"no worker node was added while cells were queued: {seen}"

        ended = time.monotonic()
        deadline = ended + IDLE_MINUTES * 60 + 120
        after = None
        while time.monotonic() < deadline:
            after = _worker_nodes(env, address)
            if after == 0:
                break
            time.sleep(3)
        trace = ", ".join(f"{t:.0f}s: {n}" for t, n in seen)
        down = time.monotonic() - ended
        print(f"worker nodes while the sweep ran ({trace}); none {down:.0f}s after it")
        assert after == 0, f"the idle workers were not removed: {after} still active"
    finally:
        if sweep is not None and sweep.poll() is None:
            sweep.kill()
        _stop_ray(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("autoscale")
    cells = [r for r in client.search_runs([experiment.experiment_id]) if "cell_key" in r.data.tags]
    assert Counter(r.info.status for r in cells) == {"FINISHED": 8}
    assert "fffffffffffffffffffffffffffffffffffffffffffffffffff00000" not in {
        r.data.tags["ray_node_id"] for r in cells
    }, "a cell ran on the head, which has no CPUs"
