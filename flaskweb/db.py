"""Leaf helpers shared by every app (imports no app)."""

from django.db import models


class TimestampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        abstract = True


def is_postgres(connection) -> bool:
    return connection.vendor == "postgresql"
