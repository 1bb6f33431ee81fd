"""A request's body reaches the application as it came: the server does not parse a form
body before the application decides what to do with it (`core.request_bodies`)."""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request

import psutil

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


class PeakRss:
    """The highest resident size a process reaches while this is open (sampled)."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.before = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join()


def test_a_large_form_post_from_anyone_costs_the_server_about_its_size(
    daphne_server: LiveServer,
) -> None:
    # Twisted parses a multipart POST whole through the `email` package, into arguments
    # daphne never reads: 32 MiB grew the server by 13 times that. Unparsed, the body
    # costs about its own size while it is handed to the application, which refuses it.
    body = _multipart(BODY_MIB << 20)
    url = f"{daphne_server.url}/api/nothing-here"
    assert _post(url, _multipart(16), "multipart/form-data; boundary=XX") == 404  # warm
    with PeakRss(daphne_server.proc.pid) as rss:
        status = _post(url, body, "multipart/form-data; boundary=XX")
    assert status == 404
    grown_mib = (rss.peak - rss.before) / (1 << 20)
    assert grown_mib < 3 * BODY_MIB, f"the server grew by {grown_mib:.0f} MiB"
