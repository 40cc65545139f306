"""Annotator pages (dashboard, scoring). Included by annotation/urls.py."""

from django.urls import path

from annotation import annotate_views

urlpatterns = [
    path("tasks/", annotate_views.my_campaigns, name="my-campaigns"),
    path("campaigns/<int:pk>/annotate/", annotate_views.annotate, name="annotate"),
    path("assignments/<int:pk>/submit/", annotate_views.annotate_submit, name="annotate-submit"),
    path("assignments/<int:pk>/skip/", annotate_views.annotate_skip, name="annotate-skip"),
]
