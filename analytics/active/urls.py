from django.urls import path

from analytics.active import apis, views

urlpatterns = [
    path(
        "campaigns/<int:pk>/active-selection/",
        views.active_selection,
        name="active-selection",
    ),
    path(
        "campaigns/<int:pk>/active-selection/draw/",
        views.active_selection_draw,
        name="active-selection-draw",
    ),
]

api_urlpatterns = [
    path(
        "campaigns/<int:pk>/active-selection",
        apis.ActiveSelectionApi.as_view(),
        name="active-selection",
    ),
    path(
        "campaigns/<int:pk>/active-selection/draw",
        apis.ActiveSelectionDrawApi.as_view(),
        name="active-selection-draw",
    ),
]
