"""URLs of the campaign's pace and cost estimate: its page and API (api_urlpatterns, mounted
under /api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.pace import apis, views

urlpatterns = [
    path("campaigns/<int:pk>/pace/", views.campaign_pace, name="campaign-pace"),
]

api_urlpatterns = [
    path("campaigns/<int:pk>/cost/", apis.CampaignCostApi.as_view(), name="api-campaign-cost"),
]
