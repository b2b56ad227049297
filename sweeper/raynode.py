"""Ray nodes started by hand on a machine other Ray instances share (docs/clusters.md, "On a
shared machine"; issue #37, item 5).

A second Ray on one machine collides with the first on its default ports (the GCS's 6379,
the dashboard's 8265, the dashboard agent's 52365, ...), and Ray says so late and elsewhere:
``ray job submit`` fails after about 40 s with "No available agent to submit job" while the
cause is in ``session_latest/logs/dashboard_agent.log``. And ``ray stop`` stops every Ray of
the user on the machine, not only one's own. So::

    python -m sweeper.raynode flags --head        # free ports for every port a head listens on
    python -m sweeper.raynode preflight --port=6390 --dashboard-port=8275 ...
    python -m sweeper.raynode stop --temp-dir /tmp/ray-alice

``flags`` prints ``ray start`` flags giving each port a free one; ``preflight`` takes the
``ray start`` flags a head or worker will be started with and, before it starts, names each
port that something already listens on (and the process, when this user may see it), exit
status 2; ``stop`` ends the Ray processes whose command line names the node's own
``--temp-dir`` (SIGTERM, then SIGKILL after a grace period), never another Ray's.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import sys
import time
from contextlib import ExitStack
from pathlib import Path

NODE_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
    "metrics-export-port",
)
HEAD_PORTS = ("port", "ray-client-server-port", "dashboard-port")
DEFAULTS = {"port": 6379, "dashboard-port": 8265, "ray-client-server-port": 10001,
            "dashboard-agent-listen-port": 52365}  # fmt: skip
"""Ray's fixed default ports (the others are chosen free by Ray itself when not given)."""
WORKER_PORTS = {"min-worker-port": 10002, "max-worker-port": 19999}
"""The range Ray's workers take their ports from, by default; Ray refuses a node whose other
ports lie inside it."""
STOP_GRACE_S = 10.0


EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""The kernel's range of ports for outgoing connections (Linux)."""


def free_port_any() -> int:
    """A port free on every interface of this node (Ray's nodes listen beyond 127.0.0.1)."""
    return free_ports_any(1)[0]


def quiet_ports() -> range | None:
    """The ports no outgoing connection is given: above Ray's worker range and below the
    kernel's ephemeral range (:data:`EPHEMERAL`, 32768-60999 by default). A port chosen
    there stays free until ``ray start`` binds it unless someone binds it on purpose; one
    chosen in the ephemeral range is taken by any connection this node opens meanwhile
    (srun's, the driver's, a client's), and the GCS then fails with "Address already in
    use". None when the kernel does not say or leaves no such gap."""
    try:
        low = int(EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    quiet = range(WORKER_PORTS["max-worker-port"] + 1, low)
    return quiet if len(quiet) >= 1000 else None


def free_ports_any(count: int) -> list[int]:
    """``count`` distinct ports free on every interface, from :func:`quiet_ports` where the
    kernel leaves such a range (else any the kernel hands out): each socket is held open
    until all are bound, so no port is handed out twice."""
    quiet = quiet_ports()
    candidates = random.sample(quiet, min(len(quiet), 64 * count)) if quiet else []
    with ExitStack() as stack:
        sockets = []
        for port in [*candidates, *[0] * count]:  # the kernel's choice only as a last resort
            if len(sockets) == count:
                break
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("", port))
            except OSError:
                continue
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]


def start_flags(head: bool) -> list[str]:
    """``--<name>=<free port>`` for every port a Ray node listens on (and, for the head,
    the GCS, client server and dashboard ports: Ray checks the last even with the dashboard
    left off)."""
    names = (*HEAD_PORTS, *NODE_PORTS) if head else NODE_PORTS
    ports = free_ports_any(len(names))
    return [f"--{name}={port}" for name, port in zip(names, ports, strict=True)]


def _given(flags: list[str], names: tuple[str, ...]) -> dict[str, int]:
    """The ``--<name>=<port>`` of ``flags`` whose name is one of ``names`` (0 left out)."""
    given = {}
    for flag in flags:
        name, _, value = flag.removeprefix("--").partition("=")
        if name in names and value.isdigit() and int(value):
            given[name] = int(value)
    return given


def ports_of(flags: list[str], head: bool) -> dict[str, int]:
    """The ports ``ray start`` with ``flags`` will listen on: those given, and Ray's fixed
    defaults for the ones not given (a head's GCS, dashboard and client ports, the agent's)."""
    given = _given(flags, (*HEAD_PORTS, *NODE_PORTS))
    wanted = DEFAULTS if head else {"dashboard-agent-listen-port": 52365}
    return {**{k: v for k, v in wanted.items() if k not in given}, **given}


def taken(port: int) -> bool:
    """Whether something listens on ``port`` (on any interface: Ray binds every one)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return True
    return False


def holder(port: int) -> str:
    """The process listening on ``port``, when this user may see it (/proc/net/tcp{,6} and
    the processes' sockets); '' when it cannot tell."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(fields[9])
    sockets = {f"socket:[{inode}]" for inode in inodes}
    for process in Path("/proc").glob("[0-9]*"):
        if sockets & _links(process):
            try:
                command = (process / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:  # gone meanwhile
                continue
            return f"process {process.name} ({command.strip()[:120]})"
    return ""


def _links(process: Path) -> set[str]:
    """What the open file descriptors of ``process`` point at (empty for another user's
    process; a descriptor closed while listed, the listing's own, is left out)."""
    links = set()
    try:
        descriptors = list((process / "fd").iterdir())
    except OSError:
        return links
    for fd in descriptors:
        try:
            links.add(os.readlink(fd))
        except OSError:
            continue
    return links


def preflight(flags: list[str], head: bool) -> list[str]:
    """One line per port of ``flags`` (and Ray's defaults) that something already holds or
    that lies in the workers' port range (which ``ray start`` refuses)."""
    low, high = {**WORKER_PORTS, **_given(flags, tuple(WORKER_PORTS))}.values()
    problems = []
    for name, port in ports_of(flags, head).items():
        if low <= port <= high:
            problems.append(
                f"port {port} (--{name}) lies in the workers' port range {low}-{high} "
                "(--min-worker-port, --max-worker-port), which Ray refuses"
            )
        elif taken(port):
            who = holder(port)
            problems.append(f"port {port} (--{name}) is taken{f' by {who}' if who else ''}")
    return problems


def processes_of(temp_dir: Path) -> list[int]:
    """Pids of this user's processes whose command line names ``temp_dir`` (Ray's GCS,
    raylet, agents and workers of a node started with ``--temp-dir=temp_dir``)."""
    needle, pids = str(Path(temp_dir).resolve()), []
    for process in Path("/proc").glob("[0-9]*"):
        if int(process.name) == os.getpid():
            continue
        try:
            if process.stat().st_uid != os.getuid():
                continue
            command = (process / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile
            continue
        if needle in command:
            pids.append(int(process.name))
    return pids


def stop(temp_dir: Path, grace_s: float = STOP_GRACE_S) -> int:
    """End the Ray node(s) of ``temp_dir``: SIGTERM, then SIGKILL what is left after
    ``grace_s``; the number of processes ended."""
    pids = processes_of(temp_dir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_of(temp_dir):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while processes_of(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.5)
    return len(pids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweeper.raynode", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    flags = commands.add_parser("flags", help="free-port flags for `ray start`")
    flags.add_argument("--head", action="store_true", help="the head's flags (GCS port too)")
    check = commands.add_parser("preflight", help="name the ports of `ray start` flags taken")
    check.add_argument("--worker", action="store_true", help="a worker's flags (no GCS port)")
    end = commands.add_parser("stop", help="stop the Ray processes of one --temp-dir")
    end.add_argument("--temp-dir", type=Path, required=True, help="the node's --temp-dir")
    args, rest = parser.parse_known_args(argv)
    if args.command == "flags":
        print(" ".join(start_flags(args.head)))
        return 0
    if args.command == "stop":
        print(f"stopped {stop(args.temp_dir)} Ray process(es) of {args.temp_dir}")
        return 0
    problems = preflight(rest, head=not args.worker)
    if problems:
        print(
            f"error: {'; '.join(problems)}. A taken port is another Ray's (or another "
            "program's): give this node other ports (`python -m sweeper.raynode flags --head` "
            "prints free ones) and its own --temp-dir, then start it",
            file=sys.stderr,
        )
        return 2
    print(f"ports free: {' '.join(f'{p}' for p in ports_of(rest, not args.worker).values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
