"""Django's PostgreSQL backend with a health check that costs no round trip while the
connection is quiet, and one reusable cursor per connection for the fixed SQL of
flaskweb/db.py (`statement_cursor`).

With CONN_HEALTH_CHECKS, Django asks `SELECT 1` at the first query of every request, to
replace a connection the server closed (a PostgreSQL restart) before the request uses it.
On the annotation hot path that was one round trip in four on PostgreSQL (bench/README.md,
"PostgreSQL per submission"). A server that ends a session, by a restart,
`pg_terminate_backend` or a crash, writes its error and closes the socket, so the socket
of an idle connection it ended has something to read. This backend looks at the socket
first (one `select` with no wait): nothing to read, the connection stands as it was; anything
(or any doubt) and Django's own check runs, `SELECT 1`, and replaces a dead connection as
before. A connection that died without a word (a host gone from the network) hangs
`SELECT 1` as it hangs the request's own first statement; both end in a 503.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    _statement_cursor: psycopg.Cursor | None = None

    def statement_cursor(self) -> psycopg.Cursor:
        """A psycopg cursor on the open connection (server-side binding), the same one for
        every fixed statement of flaskweb/db.py until the connection is replaced: making a
        psycopg cursor costs about 20,000 instructions, a fifth of a statement's run in
        psycopg. The helpers run each statement to the end (execute, then fetch) before the
        next, and a connection belongs to one thread, so no two statements share it at
        once; each execute starts the cursor afresh."""
        raw = self.connection
        cursor = self._statement_cursor
        if cursor is None or cursor.closed or cursor.connection is not raw:
            cursor = self._statement_cursor = psycopg.Cursor(raw)
        return cursor

    def close_if_health_check_failed(self) -> None:
        # (attributes of Django's BaseDatabaseWrapper that its type stubs leave out)
        state: Any = self
        if (
            self.connection is not None
            and state.health_check_enabled
            and not state.health_check_done
            and not state.pool
            and _quiet(self.connection)
        ):
            state.health_check_done = True
            return
        super().close_if_health_check_failed()


def _quiet(conn) -> bool:
    """Whether an open connection, idle outside a transaction, has nothing waiting to be
    read: no error or end of session from the server."""
    try:
        if conn.closed or conn.broken:
            return False
        if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return False
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable
