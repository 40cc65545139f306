"""URLs of the catalogue pages and the skills API (api_urlpatterns, mounted under
/api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.catalogue import apis, views

urlpatterns = [
    path("projects/<slug:slug>/skills/new/", views.skill_add, name="skill-add"),
    path("projects/<slug:slug>/rubrics/import/", views.rubric_import, name="rubric-import"),
    path("catalogue/", views.catalogue, name="catalogue"),
    path("catalogue/skills/<int:skill_id>/edit/", views.rubric_edit, name="rubric-edit"),
]

api_urlpatterns = [
    path("skills/", apis.SkillListApi.as_view(), name="api-skill-list"),
]
