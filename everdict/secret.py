"""The embedded default's secret key: generated once under `var/` (mode 0600) and kept, so
sessions survive a restart without anyone having to set SECRET_KEY on a single machine.

Read by settings; imports nothing of Django's configured state.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

SECRET_KEY_FILE = "secret_key"


def embedded_secret_key(var_dir: Path) -> str:
    """Return the key kept in `var_dir`, generating it (0600) on first use and saying so.

    Two processes starting at once agree on one key: the key is written to a private
    temporary file first and linked into place, which fails for the one that comes second;
    that one reads the winner's.
    """
    path = var_dir / SECRET_KEY_FILE
    existing = _read(path)
    if existing:
        return existing
    var_dir.mkdir(parents=True, exist_ok=True)
    temporary = var_dir / f".{SECRET_KEY_FILE}.{os.getpid()}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
        os.link(temporary, path)
    except FileExistsError:
        return _read(path) or _refuse(path)
    finally:
        temporary.unlink(missing_ok=True)
    print(
        f"SECRET_KEY is not set: generated one in {path} (mode 0600) and using it. "
        "Set SECRET_KEY in production, the same on every replica.",
        file=sys.stderr,
    )
    return _read(path) or _refuse(path)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def _refuse(path: Path) -> str:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"SECRET_KEY is not set and {path} holds no key: set SECRET_KEY")
