"""URLs of languages: the annotators' picker, a campaign's Languages page (staff) and the
API of its translations (api_urlpatterns, mounted under /api/v1/annotation/). Included by
annotation/urls.py."""

from django.urls import path

from annotation.languages import apis, views

urlpatterns = [
    path("language/", views.language_pick, name="language-pick"),
    path(
        "campaigns/<int:pk>/languages/",
        views.campaign_languages_page,
        name="campaign-languages",
    ),
    path(
        "campaigns/<int:pk>/languages/<str:language>/",
        views.campaign_translation,
        name="campaign-translation",
    ),
    path(
        "campaigns/<int:pk>/languages/<str:language>/delete/",
        views.campaign_translation_delete,
        name="campaign-translation-delete",
    ),
]

api_urlpatterns = [
    path(
        "campaigns/<int:pk>/translations/",
        apis.CampaignTranslationListApi.as_view(),
        name="api-campaign-translations",
    ),
    path(
        "campaigns/<int:pk>/translations/<str:language>/",
        apis.CampaignTranslationApi.as_view(),
        name="api-campaign-translation",
    ),
]
