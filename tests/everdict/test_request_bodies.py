"""A request's body reaches the application as it came: the server does not parse a form
body before the application decides what to do with it (`core.request_bodies`)."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request

from servers import RssPeak, Server

from tests.live import LiveServer

BODY_MIB = 32


def _multipart(size: int) -> bytes:
    return (
        b"--XX\r\n"
        b'Content-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + os.urandom(size) + b"\r\n--XX--\r\n"
    )


def _post(url: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_large_form_post_from_anyone_costs_the_server_about_its_size(
    daphne_server: LiveServer,
) -> None:
    # Twisted parses a multipart POST whole through the `email` package, into arguments
    # daphne never reads: 32 MiB grew the server by 13 times that. Unparsed, the body
    # costs about its own size while it is handed to the application, which refuses it.
    body = _multipart(BODY_MIB << 20)
    url = f"{daphne_server.url}/api/nothing-here"
    assert _post(url, _multipart(16), "multipart/form-data; boundary=XX") == 404  # warm
    server = Server(daphne_server.proc, daphne_server.port)
    before = server.rss_bytes()
    sampler = RssPeak(server)
    status = _post(url, body, "multipart/form-data; boundary=XX")
    time.sleep(0.2)  # what the server still does with the body after answering
    peak = sampler.stop()
    assert status == 404
    grown_mib = (peak - before) / (1 << 20)
    assert grown_mib < 3 * BODY_MIB, f"the server grew by {grown_mib:.0f} MiB"
