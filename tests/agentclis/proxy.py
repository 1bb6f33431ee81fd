"""An HTTPS proxy that lets nothing through and remembers where the CLI wanted to go.

Pointed at by HTTPS_PROXY, it shows which hosts a CLI calls besides the model endpoint (a
login's token refresh, for one) without any of it leaving the machine.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def refusing_proxy() -> Iterator[tuple[str, list[str]]]:
    """(the proxy's URL, the `host:port` of every CONNECT it refused, in order)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_CONNECT(self) -> None:
            asked.append(self.path)
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
