"""Free ports on 127.0.0.1 for process services."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A port no one listens on now, chosen by the kernel (another program could still take
    it before the service binds it: its probe then fails, naming the port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def url_of(port: int) -> str:
    return f"http://{HOST}:{port}"
