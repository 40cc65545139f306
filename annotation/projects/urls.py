"""URLs of the hub pages (home, a new project, a project's page) and the projects API
(api_urlpatterns, mounted under /api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.projects import apis, views

urlpatterns = [
    path("", views.home, name="home"),
    # before the project page: "new" is a reserved slug (annotation.services.projects)
    path("projects/new/", views.project_create, name="project-create"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
]

api_urlpatterns = [
    path("projects/", apis.ProjectListApi.as_view(), name="api-project-list"),
]
