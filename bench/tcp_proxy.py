"""A TCP proxy on 127.0.0.1 that a fault trial can stall or mute (bench/bench_faults.py).

It forwards bytes both ways between its clients and one server, and on request:

- ``stall()``: holds every byte in both directions (read and kept, none forwarded) until
  ``resume()`` forwards them late, in order: a network or a server that stalls a call for a
  minute and then delivers it;
- ``mute()``: drops every answer of the server (the clients' requests still reach it),
  connections left open: a store that stops answering without closing the connection (a
  proxy or a firewall that loses answers); ``resume()`` forwards again.

Everything it opens is closed by :meth:`close` (the ``with`` block's end).
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress


class Proxy:
    """Forward ``127.0.0.1:port`` (a free port) to ``(host, target_port)``.

    Parameters
    ----------
    host : str
    target_port : int
    """

    def __init__(self, host: str, target_port: int) -> None:
        self.target = (host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.muted = False
        self.sockets: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stall(self) -> None:
        self.flowing.clear()

    def mute(self) -> None:
        self.muted = True

    def resume(self) -> None:
        self.muted = False
        self.flowing.set()

    def close(self) -> None:
        self.closed = True
        self.flowing.set()
        for sock in [self.listener, *self.sockets]:
            with suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                if self.closed:
                    return
                continue
            self.sockets += [client, server]
            for source, sink, answers in ((client, server, False), (server, client, True)):
                threading.Thread(
                    target=self._pump, args=(source, sink, answers), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        """Copy ``source`` into ``sink`` (``answers``: the server's side, which mute drops)."""
        try:
            while data := source.recv(65536):
                self.flowing.wait()
                if answers and self.muted:
                    continue
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
