"""A TCP proxy between the runner and the server that can hold the line: after a given
number of bytes from the client it stops forwarding until released — a link that goes quiet
in the middle of a request, so a test can restart the server while an upload is cut off at a
known point. Connections made after the server behind it changed go to the new one."""

from __future__ import annotations

import contextlib
import socket
import threading

from everdict.processes import free_port

BUFFER = 64 * 1024


class GatedProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.sent = 0  # bytes forwarded from clients to the server
        self._hold_at: int | None = None
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold_after(self, more_bytes: int) -> None:
        """Stop forwarding client bytes once `more_bytes` more have gone through."""
        with self._lock:
            self._hold_at = self.sent + more_bytes
            self._open.clear()

    @property
    def holding(self) -> bool:
        with self._lock:
            return self._hold_at is not None and self.sent >= self._hold_at

    def release(self) -> None:
        with self._lock:
            self._hold_at = None
        self._open.set()

    def close(self) -> None:
        self._closing = True
        self._open.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    def _allowance(self, size: int) -> int:
        """How many of `size` bytes may go now (0: hold)."""
        with self._lock:
            if self._hold_at is None:
                return size
            return max(0, min(size, self._hold_at - self.sent))

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(BUFFER):
                while data:
                    allowed = self._allowance(len(data))
                    if allowed == 0:
                        self._open.wait()
                        if self._closing:
                            return
                        continue
                    server.sendall(data[:allowed])
                    with self._lock:
                        self.sent += allowed
                    data = data[allowed:]
        except OSError:
            pass
        finally:
            _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(BUFFER):
                client.sendall(data)
        except OSError:
            pass
        finally:
            # The server went away (or answered and closed): so does the client's line.
            _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
