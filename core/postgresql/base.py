"""Django's PostgreSQL backend (`ENGINE = "core.postgresql"`), with one change: its pool
checks a connection leaving it with `core.pooling.check_pooled`, not an empty query."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

from core.pooling import check_pooled


class DatabaseWrapper(base.DatabaseWrapper):  # type: ignore[misc]
    @property
    def pool(self) -> Any:
        """The process's pool for this alias, made on first use as Django makes it, but
        with `check_pooled` as its check when `CONN_HEALTH_CHECKS` is on."""
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None
        pools: dict[str, Any] = self._connection_pools  # type: ignore[attr-defined]
        if self.alias not in pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            kwargs = self.get_connection_params()
            kwargs["autocommit"] = True  # Django sets the request's own later
            pool = ConnectionPool(
                kwargs=kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=check_pooled if self.settings_dict["CONN_HEALTH_CHECKS"] else None,
                **({} if options is True else options),
            )
            # Threads racing to make it keep the first one made (none is open yet).
            pools.setdefault(self.alias, pool)
        return pools[self.alias]
