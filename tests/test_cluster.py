"""A sweep joins a real two-node Ray cluster by address and runs cells on both nodes.

``ray.cluster_utils.Cluster`` (Ray's own multi-node test utility) starts a head node and a
worker node as separate raylets on this machine; the sweep's driver is a subprocess that
connects with ``launcher.address``, as on a real cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest
from mlflow import MlflowClient


@pytest.mark.e2e
def test_a_sweep_on_a_two_node_cluster_uses_both_nodes(tmp_path, tracking_uri):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True)
    try:
        cluster.add_node()
        cluster.wait_for_nodes()
        node_ids = {node.node_id for node in cluster.list_all_nodes()}
        assert len(node_ids) == 2
        args = [
            "task=toy",
            "horizon=50",
            "seeds=8",
            "+toy.sleep_s=0.5",
            "experiment.name=cluster",
            f"tracking.uri={tracking_uri}",
            f"launcher.address={cluster.address}",
            "launcher.scheduling_strategy=SPREAD",
        ]
        env = {
            k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")
        }
        done = subprocess.run(
            [sys.executable, "-m", "sweeper", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    finally:
        cluster.shutdown()

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("cluster")
    runs = [r for r in client.search_runs([experiment.experiment_id]) if "cell_key" in r.data.tags]
    assert Counter(r.info.status for r in runs) == {"FINISHED": 8}
    used = Counter(r.data.tags["ray_node_id"] for r in runs)
    assert set(used) == node_ids, f"cells ran on {dict(used)}, the cluster has {node_ids}"
    assert len({r.data.tags["node"] for r in runs}) == 2, "the node tag tells the nodes apart"


def test_cluster_yaml_is_a_valid_ray_cluster_config_that_installs_this_package():
    from pathlib import Path

    import yaml
    from ray.autoscaler._private.util import prepare_config, validate_config

    path = Path(__file__).resolve().parent.parent / "cluster.yaml"
    config = yaml.safe_load(path.read_text())
    validate_config(prepare_config(config))  # Ray's own schema (raises on a bad config)
    nodes = config["available_node_types"]
    assert config["head_node_type"] in nodes and len(nodes) >= 2
    workers = [n for name, n in nodes.items() if name != config["head_node_type"]]
    assert all(n["max_workers"] > 0 for n in workers)
    (checkout,) = [target for target, source in config["file_mounts"].items() if source == "."]
    assert any(f"cd {checkout}" in c and "pip install" in c for c in config["setup_commands"])
    # The tracking server on PostgreSQL, on the head where the driver writes into it.
    assert any("sweeper.servers --postgres" in c for c in config["head_start_ray_commands"])
    assert any("apt-get install" in c and "postgresql" in c for c in config["head_setup_commands"])


def test_cluster_local_yaml_is_a_valid_on_premises_config_with_token_data_and_package():
    """Ray's ``local`` provider (a list of hosts): Ray's own schema, and every node starts Ray
    from the venv that holds the package, with the token and the datasets' directory."""
    from pathlib import Path

    import yaml
    from ray.autoscaler._private.util import prepare_config, validate_config

    path = Path(__file__).resolve().parent.parent / "cluster-local.yaml"
    config = yaml.safe_load(path.read_text())
    prepared = prepare_config(config)
    validate_config(prepared)  # Ray's own schema (raises on a bad config)
    provider = config["provider"]
    assert provider["type"] == "local" and provider["head_ip"] and provider["worker_ips"]
    (node_type,) = prepared["available_node_types"].values()  # what the local provider makes
    assert node_type["max_workers"] == len(provider["worker_ips"]) == config["max_workers"]
    assert any("pip install" in c and "/opt/sweeper/src" in c for c in config["setup_commands"])
    starts = config["head_start_ray_commands"] + config["worker_start_ray_commands"]
    ray_starts = [c for c in starts if "ray start" in c]
    assert len(ray_starts) == 2
    for command in ray_starts:
        assert "RAY_AUTH_MODE=token" in command and "RAY_AUTH_TOKEN_PATH=" in command
        assert "SWEEPER_DATA_DIR=" in command and "/venv/bin/ray start" in command
    token_path = ray_starts[0].split("RAY_AUTH_TOKEN_PATH=")[1].split()[0]
    assert token_path in config["file_mounts"], "the token is copied to every node"
    (server,) = [c for c in config["head_start_ray_commands"] if "sweeper.servers" in c]
    assert "pgrep" not in server, "another user's server must not stop this one from starting"


def test_no_recipe_opens_ray_or_its_dashboard_to_every_interface():
    """Issue #41, item 5: the recipes' dashboards (and Ray's job API behind them) listened on
    0.0.0.0; Ray's default is the head's 127.0.0.1, reached through ``ray dashboard``."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    for name in ("cluster.yaml", "cluster-local.yaml"):
        config = yaml.safe_load((root / name).read_text())
        commands = config["head_start_ray_commands"] + config["worker_start_ray_commands"]
        assert not [c for c in commands if "0.0.0.0" in c], name


def test_no_cell_runs_beside_the_database_and_no_recipe_trusts_every_local_user():
    """Issue #27, item 4: cluster.yaml's head ran cells next to a PostgreSQL initialised with
    trust authentication, so a cell was a database superuser. Now the head offers Ray no
    CPU (a cell asks for one) and no recipe initialises PostgreSQL with trust."""
    from pathlib import Path

    import yaml
    from ray.autoscaler._private.util import prepare_config, validate_config

    root = Path(__file__).resolve().parent.parent
    config = yaml.safe_load((root / "cluster.yaml").read_text())
    prepared = prepare_config(config)
    validate_config(prepared)
    nodes = prepared["available_node_types"]
    assert nodes[config["head_node_type"]]["resources"].get("CPU") == 0
    (start,) = [c for c in config["head_start_ray_commands"] if "ray start" in c]
    assert "--head" in start and "--num-cpus=0" in start.split()
    workers = [n for name, n in nodes.items() if name != config["head_node_type"]]
    assert all(n["resources"].get("CPU", 1) > 0 for n in workers), "cells need a CPU somewhere"
    job = next(line for line in config_comments(root / "cluster.yaml") if "PGPASSFILE" in line)
    assert "/home/ray/mlflow/pgpass" in job, "the job reads the database's password file"
    recipes = ["cluster.yaml", "cluster-local.yaml", "Makefile", "sweeper/servers.py"]
    for name in recipes:
        text = (root / name).read_text()
        assert "auth=trust" not in text and "--auth trust" not in text, name
    assert "--auth=scram-sha-256" in (root / "sweeper" / "servers.py").read_text()


def config_comments(path) -> list[str]:
    """The comment lines of a YAML file (where cluster.yaml shows its `ray job submit`)."""
    return [line for line in path.read_text().splitlines() if line.lstrip().startswith("#")]
