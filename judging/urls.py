from django.urls import path

from judging import apis, views
from judging.metadata import apis as metadata_apis
from judging.metadata import views as metadata_views
from judging.output_imports import apis as output_import_apis
from judging.probes import apis as probe_apis
from judging.probes import views as probe_views

app_name = "judging"

urlpatterns = [
    path("projects/<slug:slug>/judges/", views.judge_list, name="judge-list"),
    path("projects/<slug:slug>/judges/new/", views.judge_create, name="judge-create"),
    path("projects/<slug:slug>/judge-templates/", views.template_list, name="template-list"),
    path(
        "projects/<slug:slug>/judge-templates/new/", views.template_create, name="template-create"
    ),
    path(
        "projects/<slug:slug>/judge-templates/import/",
        views.template_import,
        name="template-import",
    ),
    path(
        "projects/<slug:slug>/judge-templates/<int:pk>/",
        views.template_detail,
        name="template-detail",
    ),
    path("judges/<int:pk>/", views.judge_detail, name="judge-detail"),
    path("judges/<int:pk>/runs/new/", views.run_create, name="run-create"),
    path("judge-runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("judge-runs/<int:pk>/start/", views.run_start, name="run-start"),
    path("judge-runs/<int:pk>/pause/", views.run_pause, name="run-pause"),
    path("judge-runs/<int:pk>/resume/", views.run_resume, name="run-resume"),
    path("judge-runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("judgments/<int:pk>/", views.judgment_detail, name="judgment-detail"),
    path("judge-runs/<int:pk>/probes/new/", probe_views.probe_create, name="probe-create"),
    path("projects/<slug:slug>/model-families/", probe_views.families, name="families"),
    path(
        "datasets/<int:pk>/metadata-runs/new/",
        metadata_views.metadata_run_create_page,
        name="metadata-run-create",
    ),
    path("metadata-runs/<int:pk>/", metadata_views.metadata_run_detail, name="metadata-run-detail"),
    path(
        "metadata-runs/<int:pk>/action/",
        metadata_views.metadata_run_action,
        name="metadata-run-action",
    ),
]

api_urlpatterns = [
    path("projects/<slug:slug>/providers/", apis.ProviderListApi.as_view(), name="provider-list"),
    path("projects/<slug:slug>/judges/", apis.JudgeListApi.as_view(), name="judge-list"),
    path("projects/<slug:slug>/judges/create/", apis.JudgeCreateApi.as_view(), name="judge-create"),
    path("judges/<int:pk>/", apis.JudgeDetailApi.as_view(), name="judge-detail"),
    path("judges/<int:pk>/estimate/", apis.JudgeRunEstimateApi.as_view(), name="run-estimate"),
    path("judges/<int:pk>/runs/create/", apis.JudgeRunCreateApi.as_view(), name="run-create"),
    path("runs/<int:pk>/", apis.JudgeRunDetailApi.as_view(), name="run-detail"),
    path("runs/<int:pk>/start/", apis.JudgeRunStartApi.as_view(), name="run-start"),
    path("runs/<int:pk>/pause/", apis.JudgeRunPauseApi.as_view(), name="run-pause"),
    path("runs/<int:pk>/resume/", apis.JudgeRunResumeApi.as_view(), name="run-resume"),
    path("runs/<int:pk>/cancel/", apis.JudgeRunCancelApi.as_view(), name="run-cancel"),
    path("runs/<int:pk>/judgments/", apis.JudgmentListApi.as_view(), name="judgment-list"),
    path(
        "projects/<slug:slug>/judge-outputs/import/",
        output_import_apis.JudgeOutputImportApi.as_view(),
        name="judge-output-import",
    ),
    path(
        "judge-output-imports/<int:pk>/",
        output_import_apis.JudgeOutputImportJobApi.as_view(),
        name="judge-output-import-job",
    ),
    path("runs/<int:pk>/scores/", apis.RunScoresApi.as_view(), name="run-scores"),
    path("runs/<int:pk>/pairwise/", apis.RunPairwiseApi.as_view(), name="run-pairwise"),
    path("runs/<int:pk>/probes/", probe_apis.ProbeRunApi.as_view(), name="run-probes"),
    path("projects/<slug:slug>/families/", probe_apis.FamiliesApi.as_view(), name="families"),
    path(
        "datasets/<int:pk>/metadata-runs/",
        metadata_apis.MetadataRunCreateApi.as_view(),
        name="metadata-run-create",
    ),
    path(
        "metadata-runs/<int:pk>/",
        metadata_apis.MetadataRunDetailApi.as_view(),
        name="metadata-run-detail",
    ),
    path(
        "metadata-runs/<int:pk>/pause/",
        metadata_apis.MetadataRunPauseApi.as_view(),
        name="metadata-run-pause",
    ),
    path(
        "metadata-runs/<int:pk>/resume/",
        metadata_apis.MetadataRunResumeApi.as_view(),
        name="metadata-run-resume",
    ),
    path(
        "metadata-runs/<int:pk>/cancel/",
        metadata_apis.MetadataRunCancelApi.as_view(),
        name="metadata-run-cancel",
    ),
]
