"""URLs of campaign management (admins, researchers): pages, and the API
(api_urlpatterns, mounted under /api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.campaigns import apis, views

urlpatterns = [
    path("projects/<slug:slug>/campaigns/", views.campaign_list, name="campaign-list"),
    path("projects/<slug:slug>/campaigns/new/", views.campaign_create, name="campaign-create"),
    path("campaigns/<int:pk>/", views.campaign_detail, name="campaign-detail"),
    path("campaigns/<int:pk>/edit/", views.campaign_update, name="campaign-update"),
    path("campaigns/<int:pk>/activate/", views.campaign_activate, name="campaign-activate"),
    path("campaigns/<int:pk>/status/", views.campaign_status, name="campaign-status"),
    path("campaigns/<int:pk>/gold/", views.campaign_gold_set, name="campaign-gold-set"),
    path(
        "campaigns/<int:pk>/gold/remove/",
        views.campaign_gold_remove,
        name="campaign-gold-remove",
    ),
    path(
        "campaigns/<int:pk>/expertise/",
        views.campaign_expertise_set,
        name="campaign-expertise-set",
    ),
]

api_urlpatterns = [
    path(
        "projects/<slug:slug>/campaigns/", apis.CampaignListApi.as_view(), name="api-campaign-list"
    ),
    path("campaigns/<int:pk>/", apis.CampaignDetailApi.as_view(), name="api-campaign"),
    path(
        "campaigns/<int:pk>/activate/",
        apis.CampaignActivateApi.as_view(),
        name="api-campaign-activate",
    ),
    path(
        "campaigns/<int:pk>/assignments/",
        apis.CampaignAssignmentListApi.as_view(),
        name="api-campaign-assignments",
    ),
    path(
        "campaigns/<int:pk>/status/", apis.CampaignStatusApi.as_view(), name="api-campaign-status"
    ),
    path("campaigns/<int:pk>/gold/", apis.CampaignGoldListApi.as_view(), name="api-campaign-gold"),
    path(
        "campaigns/<int:pk>/gold/<int:task_id>/",
        apis.CampaignGoldDetailApi.as_view(),
        name="api-campaign-gold-task",
    ),
]
