"""Campaign management pages (admins, researchers). Included by annotation/urls.py."""

from django.urls import path

from annotation import campaign_views as views

urlpatterns = [
    path("projects/<slug:slug>/campaigns/", views.campaign_list, name="campaign-list"),
    path("projects/<slug:slug>/campaigns/new/", views.campaign_create, name="campaign-create"),
    path("campaigns/<int:pk>/", views.campaign_detail, name="campaign-detail"),
    path("campaigns/<int:pk>/edit/", views.campaign_update, name="campaign-update"),
    path("campaigns/<int:pk>/activate/", views.campaign_activate, name="campaign-activate"),
    path("campaigns/<int:pk>/status/", views.campaign_status, name="campaign-status"),
    path("campaigns/<int:pk>/gold/", views.campaign_gold_set, name="campaign-gold-set"),
    path(
        "campaigns/<int:pk>/expertise/",
        views.campaign_expertise_set,
        name="campaign-expertise-set",
    ),
]
