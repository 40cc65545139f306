"""Analytics pages URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.report import views

urlpatterns: list = [
    path("projects/<slug:slug>/analytics/", views.dashboard, name="dashboard"),
]
api_urlpatterns: list = []
