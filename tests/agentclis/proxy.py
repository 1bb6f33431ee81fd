"""An HTTPS proxy that answers for one host and lets nothing else through.

Pointed at by HTTPS_PROXY, with its throwaway CA trusted through NODE_EXTRA_CA_CERTS, it
stands in for a host a CLI will not let be moved to 127.0.0.1 — Claude Code refreshes its
login only at platform.claude.com — and answers it from the test. Every other CONNECT is
refused (403) and remembered, so nothing leaves the machine.
"""

from __future__ import annotations

import datetime
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Proxy:
    url: str
    ca: Path
    # The `host:port` of every CONNECT, in order; and what the stood-in host was asked.
    connects: list[str] = field(default_factory=list)
    requests: list[tuple[str, Any]] = field(default_factory=list)


def _certificate(
    subject: str, key: Any, issuer: str, issuer_key: Any, *, ca: bool
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), False)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _tls_for(host: str, where: Path) -> tuple[Path, ssl.SSLContext]:
    """A throwaway CA (its PEM written to `where`) and a server context for `host`."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("scripted test CA", ca_key, "scripted test CA", ca_key, ca=True)
    leaf = _certificate(host, key, "scripted test CA", ca_key, ca=False)
    pem = serialization.Encoding.PEM
    (where / "ca.pem").write_bytes(ca.public_bytes(pem))
    (where / "leaf.pem").write_bytes(leaf.public_bytes(pem))
    (where / "leaf.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(where / "leaf.pem", where / "leaf.key")
    return where / "ca.pem", context


@contextmanager
def standing_in_for(host: str, answer: Any, where: Path) -> Iterator[Proxy]:
    """A proxy that answers every request to `host` (port 443) with the JSON `answer`."""
    ca, context = _tls_for(host, where)
    proxy = Proxy(url="", ca=ca)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_CONNECT(self) -> None:
            proxy.connects.append(self.path)
            if self.path != f"{host}:443":
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.close_connection = True
            # A client that does not trust the stand-in ends the handshake, or hangs up.
            try:
                with context.wrap_socket(self.connection, server_side=True) as tls:
                    self._answer(tls)
            except (ssl.SSLError, OSError):
                pass

        def _answer(self, tls: ssl.SSLSocket) -> None:
            stream = tls.makefile("rb")
            request_line = stream.readline().decode().strip()
            if not request_line:
                return
            length = 0
            while (line := stream.readline().decode()).strip():
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = stream.read(length)
            proxy.requests.append((request_line, json.loads(body) if body else None))
            data = json.dumps(answer).encode()
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
            )
            tls.sendall(head.encode() + data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
