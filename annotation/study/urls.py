"""URLs of study links: the researchers' study page of a campaign and the workers' pages
(entry link, consent, instructions, completion). Included by annotation/urls.py. The entry
link's shape, /study/<token>/?<platform parameters>, is what platforms hold: keep it."""

from django.urls import path

from annotation.study import apis, views

urlpatterns = [
    path("campaigns/<int:pk>/study/", views.campaign_study, name="campaign-study"),
    path(
        "campaigns/<int:pk>/study/links/",
        views.campaign_study_link_create,
        name="campaign-study-link-create",
    ),
    path(
        "campaigns/<int:pk>/study/links/<int:link_id>/status/",
        views.campaign_study_link_status,
        name="campaign-study-link-status",
    ),
    path(
        "campaigns/<int:pk>/study/participants/",
        views.campaign_study_participants,
        name="campaign-study-participants",
    ),
    # the fixed study pages before the token route (tokens never spell these words)
    path("study/", views.study_resume, name="study-resume"),
    path("study/consent/", views.study_consent, name="study-consent"),
    path("study/instructions/", views.study_instructions, name="study-instructions"),
    path("study/finish/", views.study_finish, name="study-finish"),
    path("study/continue/", views.study_continue, name="study-continue"),
    path("study/<slug:token>/", views.study_entry, name="study-entry"),
]

api_urlpatterns = [
    path(
        "campaigns/<int:pk>/participants/",
        apis.CampaignParticipantListApi.as_view(),
        name="api-campaign-participants",
    ),
]
