"""The shared-machine preflight (sweeper.raynode; issue #37, item 5), without Ray: a port this
test listens on is named with its process, a port in the workers' range is refused, and the
command says both in one paragraph with exit status 2. The recipe itself, beside a real
second Ray, is tests/test_shared_machine.py (slow)."""

from __future__ import annotations

import os
import socket

from sweeper.raynode import free_port_any, main, ports_of, preflight


def test_a_port_something_listens_on_is_named_with_its_process(capsys):
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        port = sock.getsockname()[1]
        flags = [f"--port={port}", f"--dashboard-port={free_port_any()}"]
        flags += [f"--dashboard-agent-listen-port={free_port_any()}"]
        flags += [f"--ray-client-server-port={free_port_any()}"]
        assert preflight(flags, head=True) == [
            f"port {port} (--port) is taken by process {os.getpid()} ({_command()})"
        ]
        assert main(["preflight", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: port {port} (--port) is taken") and err.count("\n") == 1
    assert "sweeper.raynode flags --head" in err
    assert main(["preflight", *flags]) == 0  # the socket closed: every port free


def _command() -> str:
    with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()[:120]


def test_a_port_inside_the_workers_range_is_refused_before_ray_is():
    problems = preflight(["--port=6390", "--ray-client-server-port=10011"], head=True)
    assert any(
        p.startswith("port 10011 (--ray-client-server-port) lies in the workers'") for p in problems
    )
    moved = preflight(["--ray-client-server-port=10011", "--min-worker-port=20000"], head=True)
    assert not any("10011" in p for p in moved)


def test_a_worker_checks_only_its_agent_port_by_default():
    assert ports_of([], head=False) == {"dashboard-agent-listen-port": 52365}
    assert ports_of(["--port=7000"], head=True)["port"] == 7000
