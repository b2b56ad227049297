"""Ray inside a Slurm allocation: the two steps of the batch recipe that shell cannot do well
(:mod:`sweeper.slurm` writes the recipe; docs/slurm.md explains it).

``python -m sweeper.slurm_ray flags [--head]`` prints the ``ray start`` flags that give a
node free ports of its own. On a node shared with other jobs (or other users' Ray) the
defaults (6379, the dashboard agent's 52365, ...) may be taken; a port chosen free just
before ``ray start`` binds it is taken only by a race.

``python -m sweeper.slurm_ray head-ip NODE`` prints the address the other nodes reach the
head at (:func:`node_address`).

``python -m sweeper.slurm_ray wait --address HOST:PORT --nodes N`` waits until the Ray
cluster at ``HOST:PORT`` answers and has ``N`` alive nodes (the head and a worker on every
other node of the allocation), so that the sweep starts on the whole allocation and not on
whichever nodes happened to have joined; exit status 1 with the nodes seen when they do not
join in time; with ``--step PID`` (the head's ``srun``), exit status 3 as soon as that step
ends before the head answers, so that the recipe starts the head again on other ports.
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import time

from sweeper.process import pid_running
from sweeper.raynode import HEAD_PORTS, NODE_PORTS, free_port_any  # noqa: F401 - used by tests
from sweeper.raynode import start_flags as raynode_flags

SCONTROL_S = 20.0


def start_flags(head: bool) -> list[str]:
    """``--<name>=<free port>`` for every port a Ray node listens on
    (:func:`sweeper.raynode.start_flags`), the head's dashboard left off (the sweep does not
    use it)."""
    flags = raynode_flags(head)
    return [*flags, "--include-dashboard=false"] if head else flags


def node_address(node: str) -> str:
    """The IP address other nodes reach ``node`` at: its ``NodeAddr`` in Slurm's config
    (what slurmctld itself uses; ``hostname --ip-address`` may say 127.0.1.1 on Debian),
    resolved when it is a name; the node's name resolved when Slurm does not say."""
    try:
        done = subprocess.run(
            ["scontrol", "--oneliner", "show", "node", node],
            capture_output=True,
            text=True,
            timeout=SCONTROL_S,
        )
    except (OSError, subprocess.TimeoutExpired):  # no scontrol here, or no slurmctld answers
        done = None
    found = re.search(r"\bNodeAddr=(\S+)", done.stdout) if done and not done.returncode else None
    return socket.gethostbyname(found.group(1) if found else node)


def alive_nodes() -> int:
    """Alive nodes of the cluster this process joined."""
    import ray

    return sum(1 for node in ray.nodes() if node["Alive"])


JOINED, NOT_JOINED, HEAD_EXITED = 0, 1, 3
"""``wait``'s exit statuses: every node joined; not in time; the head's step ended first."""


def wait_for_nodes(
    address: str, nodes: int, timeout_s: float, out=None, step: int | None = None
) -> int:
    """Wait until the cluster at ``address`` answers and has ``nodes`` alive nodes:
    :data:`JOINED`, or :data:`NOT_JOINED` after ``timeout_s``, or :data:`HEAD_EXITED` at
    once when ``step`` (the process id of the head's ``srun``) ended before the head
    answered, so that the recipe starts it again on other ports."""
    import ray

    out = out or sys.stdout
    deadline = time.monotonic() + timeout_s
    host, _, port = address.rpartition(":")
    while not _listening(host, int(port)):
        if step is not None and not pid_running(step):
            print(f"sweeper-slurm: the Ray head exited before it answered at {address} (a "
                  "port taken since it was chosen?); starting it on other ports",
                  file=out, flush=True)  # fmt: skip
            return HEAD_EXITED
        if time.monotonic() > deadline:
            print(
                f"sweeper-slurm: no Ray head answers at {address} after {timeout_s:.0f}s",
                file=out,
                flush=True,
            )
            return NOT_JOINED
        time.sleep(0.5)
    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        seen = alive_nodes()
        while seen < nodes and time.monotonic() < deadline:
            time.sleep(1.0)
            seen = alive_nodes()
    finally:
        ray.shutdown()
    print(f"sweeper-slurm: {seen} of {nodes} Ray node(s) joined at {address}", file=out, flush=True)
    return JOINED if seen >= nodes else NOT_JOINED


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


TOKEN_AUTH_RAY = "2.52"
"""The first Ray with token authentication (``RAY_AUTH_MODE=token``); older ones ignore it."""


def token_auth() -> str:
    """'' when this Ray has token authentication, else the one paragraph saying what a
    cluster without it means (the job then starts Ray without it)."""
    import ray
    from packaging.version import Version

    if Version(ray.__version__) >= Version(TOKEN_AUTH_RAY):
        return ""
    return (
        f"note: Ray {ray.__version__} has no token authentication (Ray {TOKEN_AUTH_RAY} and "
        "later): this job's Ray nodes start without it, so anyone who reaches their ports on "
        "the cluster's network can submit work to them. Install Ray "
        f"{TOKEN_AUTH_RAY} or later into this Python (the cluster's nodes run the same "
        "Ray), or keep the allocation's nodes on a network only you reach"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweeper.slurm_ray",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    flags = commands.add_parser("flags", help="free-port flags for `ray start`")
    flags.add_argument("--head", action="store_true", help="the head's flags (GCS port too)")
    wait = commands.add_parser("wait", help="wait until every node of the allocation joined")
    wait.add_argument("--address", required=True, help="the head's HOST:PORT")
    wait.add_argument("--nodes", type=int, required=True, help="alive nodes to wait for")
    wait.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    wait.add_argument("--step", type=int, help="the head's srun: exit 3 if it ends first")
    commands.add_parser("token-auth", help="exit 0 if this Ray has token authentication")
    address = commands.add_parser("head-ip", help="a node's address (Slurm's NodeAddr)")
    address.add_argument("node", help="the node's name (scontrol show hostnames)")
    args = parser.parse_args(argv)
    if args.command == "head-ip":
        print(node_address(args.node))
        return 0
    if args.command == "flags":
        print(" ".join(start_flags(args.head)))
        return 0
    if args.command == "token-auth":
        note = token_auth()
        if note:
            print(note, file=sys.stderr)
        return 1 if note else 0
    return wait_for_nodes(args.address, args.nodes, args.timeout, step=args.step)


if __name__ == "__main__":
    sys.exit(main())
