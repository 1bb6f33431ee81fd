"""A container image made on this machine, for the demo's service harness and the tests: a
`docker import` of a root holding Debian's static busybox, whose `httpd` serves `/www`.

Nothing is pulled: a demo or a test needs no registry.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "httpd", "sleep", "echo", "cat", "ls", "nc", "true")
# Serves /www on 8080 in the foreground (the container's main process).
HTTPD = ["/bin/httpd", "-f", "-v", "-p", "8080", "-h", "/www"]


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", mode: int = 0o644, **kw: Any) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    for key, value in kw.items():
        setattr(info, key, value)
    if info.type == tarfile.REGTYPE:
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data else None)


def busybox_root(page: str) -> bytes:
    """A tar of the image's root: /bin/busybox, its applets, /www/index.html, /tmp."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in ("bin", "www", "tmp"):
            mode = 0o1777 if directory == "tmp" else 0o755
            _add(tar, directory, mode=mode, type=tarfile.DIRTYPE)
        _add(tar, "bin/busybox", BUSYBOX.read_bytes(), mode=0o755)
        for applet in APPLETS:
            _add(tar, f"bin/{applet}", type=tarfile.SYMTYPE, linkname="busybox", mode=0o777)
        _add(tar, "www/index.html", page.encode())
    return buffer.getvalue()


def busybox_image(image: str, page: str) -> str:
    """Have `image` on the Docker daemon (imported once, serving `page`); return its name.
    Raise OSError when there is no static busybox here, or the docker SDK's errors."""
    import docker
    import docker.errors

    client = docker.from_env()
    try:
        client.images.get(image)
        return image
    except docker.errors.ImageNotFound:
        pass
    if not BUSYBOX.is_file():
        raise OSError(f"no {BUSYBOX} to make {image} of (Debian's busybox-static)")
    repository, tag = image.rsplit(":", 1)
    client.api.import_image_from_data(
        busybox_root(page), repository=repository, tag=tag, changes=['CMD ["/bin/sh"]']
    )
    return image
