"""A TCP proxy on 127.0.0.1 that can be frozen: a network partition that
leaves every connection open.

:class:`FreezableProxy` forwards each connection it accepts to a target
(PostgreSQL: a worker cut off from the database only, in
``tests/integration/worker/test_self_fence_workers.py`` and the fault soak's
``db_partition``, ``tests/faults/soakfaults.py``). :meth:`FreezableProxy.freeze`
stops the forwarding in both directions: nothing is read from either side
any more, nothing is closed, so the client's statements neither answer nor
fail (its kernel still acknowledges what it sends, so TCP keepalives and
``tcp_user_timeout`` see nothing wrong), and new connections are accepted
but their startup never reaches the server. :meth:`FreezableProxy.thaw`
lets everything through again, in order. A connection whose two sides
have both closed is closed here too (a proxy may live as long as a soak,
through restarts of its server and kills of its clients).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import sqlalchemy as sa


class FreezableProxy:
    """Forwards 127.0.0.1:``port`` to ``host``:``target_port`` (module doc)."""

    def __init__(self, host: str, target_port: int) -> None:
        self.target = (host, target_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = int(self._server.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._accepting.start()

    def url(self, url: str) -> str:
        """``url`` (a database URL naming the target) through this proxy."""
        return (
            sa.engine.make_url(url)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._server, *sockets]:
            with contextlib.suppress(OSError):
                sock.close()
        self._accepting.join(5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            pair = [client, upstream]
            with self._lock:
                self._sockets += pair
            # the pump that ends last closes the pair
            ends = threading.Semaphore(1)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, pair, ends),
                    name="proxy-pump",
                    daemon=True,
                ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        pair: list[socket.socket],
        ends: threading.Semaphore,
    ) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._flowing.wait()  # frozen: hold what came, read nothing more
                if self._closed.is_set():
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            if not ends.acquire(blocking=False):  # the other side ended first
                self._drop(pair)

    def _drop(self, pair: list[socket.socket]) -> None:
        with self._lock:
            self._sockets = [s for s in self._sockets if s not in pair]
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.close()


@contextlib.contextmanager
def freezable_proxy(url: str) -> Iterator[FreezableProxy]:
    """A proxy to the server ``url`` names, closed when the block ends."""
    parsed = sa.engine.make_url(url)
    proxy = FreezableProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
    try:
        yield proxy
    finally:
        proxy.close()
