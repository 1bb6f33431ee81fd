"""The check a pooled PostgreSQL connection passes as it leaves the pool.

psycopg_pool's own check (`ConnectionPool.check_connection`, what Django installs when
`CONN_HEALTH_CHECKS` is on) sends an empty query: a round trip for every request and tool
call that touches the database, to learn what the connection's socket already says. A
connection that sits idle in the pool receives nothing unless something happened to it: the
server ended it (a restart, `pg_terminate_backend`, an idle timeout: an error message, then
the end of the stream) or a proxy between dropped it. So the socket is asked first, without
waiting; only a connection with something to read (or one psycopg already knows is broken)
pays the round trip, which then reads what arrived and fails as the pool's own check would.

A peer that vanished without a word (a network cut, no FIN) is caught by neither check: the
empty query would wait on it as long as the request's first statement will.
"""

from __future__ import annotations

import select
from typing import Any

from psycopg import pq
from psycopg_pool import ConnectionPool


def check_pooled(conn: Any) -> None:
    """Return quietly if `conn` may be handed out; raise (the pool then discards it and
    tries another) if it is closed or fails the empty query its socket called for."""
    pgconn = conn.pgconn
    if conn.closed or pgconn.status != pq.ConnStatus.OK:
        ConnectionPool.check_connection(conn)  # raises, naming what is wrong
        return
    if pgconn.transaction_status != pq.TransactionStatus.IDLE or readable(pgconn.socket):
        ConnectionPool.check_connection(conn)


def readable(fd: int) -> bool:
    """Whether anything (a message, the end of the stream, an error) is waiting on `fd`
    (assumed so where `poll` is missing, so the empty query decides)."""
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))
