"""Judge leaderboard and evaluation card URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.cards import apis, views

urlpatterns: list = [
    path("analytics/judges/", views.judge_leaderboard, name="judge-leaderboard"),
    path("projects/<slug:slug>/analytics/card/", views.judge_card_current, name="judge-card"),
    path(
        "projects/<slug:slug>/analytics/snapshots/<int:snapshot_id>/card.md",
        views.judge_card_markdown,
        name="judge-card-md",
    ),
    path(
        "projects/<slug:slug>/analytics/snapshots/<int:snapshot_id>/card.json",
        views.judge_card_json,
        name="judge-card-json",
    ),
]
api_urlpatterns: list = [
    path(
        "analytics/judge-leaderboard", apis.JudgeLeaderboardApi.as_view(), name="judge-leaderboard"
    ),
    path(
        "projects/<slug:slug>/analytics/snapshots/<int:snapshot_id>/card",
        apis.JudgeCardApi.as_view(),
        name="judge-card",
    ),
]
