"""Campaign management pages (admins, researchers). Included by annotation/urls.py."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
