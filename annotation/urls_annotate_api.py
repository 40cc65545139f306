"""JSON API of the annotation workflow. Mounted under /api/v1/annotation/ by flaskweb/urls.py."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
