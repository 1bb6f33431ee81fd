"""The image of the container tests, made here (`everdict.demo_image`: a `docker import` of
Debian's static busybox, `make docker-deps`); no registry is reachable, nothing is pulled."""

from __future__ import annotations

from everdict.demo_image import HTTPD
from everdict.demo_image import busybox_image as _made

IMAGE = "everdict-test/busybox:1"
PAGE = "hello from a busybox container\n"

__all__ = ["HTTPD", "IMAGE", "PAGE", "busybox_image"]


def busybox_image(image: str = IMAGE) -> str:
    return _made(image, PAGE)
