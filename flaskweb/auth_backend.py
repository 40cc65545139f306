"""Django's ModelBackend with the signed-in user read by one fixed statement.

Every request of a signed-in person or study participant loads its user from the id in the
session (django.contrib.auth.get_user -> the backend's `get_user`). Django builds that
query through the ORM each time; this backend reads the same row, every column, with fixed
SQL (flaskweb/db.py `ModelRow`) and applies the same rule (`user_can_authenticate`: an
inactive user is nobody). Nothing is cached, so a deactivated user or a changed password
(the session hash) takes effect on the next request, as before. Authentication by password
and permissions are ModelBackend's own.

Sessions record the backend's dotted path. Ones signed in under Django's path before this
backend existed are read as this backend's (flaskweb/sessions.py), so nobody is signed
out by the upgrade.
"""

from __future__ import annotations

from django.contrib.auth import backends, get_user_model

from flaskweb.db import ModelRow, fetch_one

PATH = "flaskweb.auth_backend.ModelBackend"
#: The path sessions recorded before this backend: read as PATH.
EARLIER_PATH = "django.contrib.auth.backends.ModelBackend"

_row: ModelRow | None = None
_sql = ""


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        global _row, _sql
        if _row is None:
            user_model = get_user_model()
            _row = ModelRow(user_model, "u")
            _sql = (
                f"SELECT {_row.columns} FROM {user_model._meta.db_table} u "
                f"WHERE u.{user_model._meta.pk.column} = %s"
            )
        found = fetch_one(_sql, [user_id])
        if found is None:
            return None
        user = _row.instance(found)
        return user if self.user_can_authenticate(user) else None
