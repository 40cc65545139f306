"""Django's database sessions, read with one fixed statement (SESSION_ENGINE).

Every request of a signed-in person or a study participant reads its session first. The
ORM built that read in more time than PostgreSQL took to run it (bench/README.md "The
participants' page path in process"); this store reads the same row with fixed SQL
(flaskweb/db.py, prepared on PostgreSQL) and behaves as Django's: an unknown or expired key
is forgotten and the session starts empty. Writes, deletes and `exists` stay Django's. The
table and the stored data are Django's own, so sessions made before and after are one
(one made under Django's ModelBackend reads as flaskweb/auth_backend.py's).
"""

from __future__ import annotations

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from flaskweb import auth_backend
from flaskweb.db import db_datetime, fetch_one

_READ = (
    f"SELECT session_data FROM {Session._meta.db_table} WHERE session_key = %s AND expire_date > %s"
)


class SessionStore(db.SessionStore):
    def load(self) -> dict:
        row = fetch_one(_READ, [self.session_key, db_datetime(timezone.now())])
        if row is None:
            self._session_key = None  # as Django's: a key that reads nothing is dropped
            return {}
        data = self.decode(row[0])
        if data.get(BACKEND_SESSION_KEY) == auth_backend.EARLIER_PATH:
            # signed in before flaskweb's backend (Django's own, whose subclass it is):
            # read as signed in with it; stored again only when the session changes
            data[BACKEND_SESSION_KEY] = auth_backend.PATH
        return data
