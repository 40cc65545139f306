"""Annotator pages (dashboard, scoring). Included by annotation/urls.py."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
