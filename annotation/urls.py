from django.urls import include, path

from annotation import apis, campaign_apis, dataset_apis, member_apis, member_views, views

app_name = "annotation"

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
    path("projects/<slug:slug>/uploads/new/", views.upload_create, name="upload-create"),
    path("projects/<slug:slug>/skills/new/", views.skill_add, name="skill-add"),
    path("projects/<slug:slug>/rubrics/import/", views.rubric_import, name="rubric-import"),
    path("projects/<slug:slug>/members/", member_views.member_list, name="member-list"),
    path(
        "projects/<slug:slug>/members/<path:username>/",
        member_views.member_update,
        name="member-update",
    ),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset-detail"),
    path("items/<int:pk>/", views.item_detail, name="item-detail"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload-detail"),
    path("catalogue/", views.catalogue, name="catalogue"),
    path("catalogue/skills/<int:skill_id>/edit/", views.rubric_edit, name="rubric-edit"),
    path("", include("annotation.urls_annotate")),
    path("", include("annotation.urls_campaigns")),
]

api_urlpatterns = [
    path("projects/", apis.ProjectListApi.as_view(), name="api-project-list"),
    path("projects/<slug:slug>/datasets/", apis.DatasetListApi.as_view(), name="api-dataset-list"),
    path("datasets/<int:pk>/", dataset_apis.DatasetDetailApi.as_view(), name="api-dataset"),
    path("datasets/<int:pk>/items/", dataset_apis.ItemListApi.as_view(), name="api-item-list"),
    path("items/<int:pk>/", dataset_apis.ItemDetailApi.as_view(), name="api-item"),
    path("skills/", apis.SkillListApi.as_view(), name="api-skill-list"),
    path("uploads/", apis.UploadCreateApi.as_view(), name="api-upload-create"),
    path("uploads/<int:pk>/", apis.UploadDetailApi.as_view(), name="api-upload-detail"),
    path("", include("annotation.urls_annotate_api")),
    # campaign management (staff) and project membership
    path(
        "projects/<slug:slug>/campaigns/",
        campaign_apis.CampaignListApi.as_view(),
        name="api-campaign-list",
    ),
    path("campaigns/<int:pk>/", campaign_apis.CampaignDetailApi.as_view(), name="api-campaign"),
    path(
        "campaigns/<int:pk>/activate/",
        campaign_apis.CampaignActivateApi.as_view(),
        name="api-campaign-activate",
    ),
    path(
        "campaigns/<int:pk>/assignments/",
        dataset_apis.CampaignAssignmentListApi.as_view(),
        name="api-campaign-assignments",
    ),
    path(
        "campaigns/<int:pk>/status/",
        campaign_apis.CampaignStatusApi.as_view(),
        name="api-campaign-status",
    ),
    path(
        "projects/<slug:slug>/members/",
        member_apis.MemberListApi.as_view(),
        name="api-member-list",
    ),
    path(
        "projects/<slug:slug>/members/<path:username>/",
        member_apis.MemberDetailApi.as_view(),
        name="api-member",
    ),
]
