"""Root URLs: the composition root mounts every app's pages and APIs."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from analytics.report.apis import AnalyticsReportApi
from analytics.urls import api_urlpatterns as analytics_api
from annotation.urls import api_urlpatterns as annotation_api
from flaskweb import health, metrics
from flaskweb.account import api_token
from flaskweb.security import ThrottledLoginView
from flaskweb.views import favicon
from judging.urls import api_urlpatterns as judging_api_urlpatterns

# Swagger UI. The split view serves its start-up script as a file, as the Content-Security-
# Policy allows no inline script. It is a page: Django's CSRF middleware refuses a POST
# without the token (DRF exempts its views and checks CSRF itself, and this view's HTML
# renderer would drop the reason).
api_docs = SpectacularSwaggerSplitView.as_view(url_name="api-schema")
api_docs.csrf_exempt = False

urlpatterns = [
    # The annotation API first: Django tries the patterns in order, and its next/submit are
    # the hot path (bench/README.md "Hot-path CPU"). Behind the pages' ~130 patterns,
    # resolving them cost more than authenticating the request. No page pattern starts
    # with "api/", so the order changes no resolution (tests/test_urls_order.py).
    path("api/v1/annotation/", include((annotation_api, "annotation-api"))),
    path("", include("annotation.urls")),
    path("", include("judging.urls")),
    path("", include("analytics.urls")),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/token/", api_token, name="account-token"),
    path("admin/", admin.site.urls),
    path("api/v1/judging/", include((judging_api_urlpatterns, "judging-api"))),
    path(
        "api/v1/projects/<slug:slug>/analytics/report",
        AnalyticsReportApi.as_view(),
        name="analytics-report",
    ),
    path("api/v1/", include((analytics_api, "analytics-api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("favicon.ico", favicon, name="favicon"),
    # health probes and Prometheus metrics (docs/OPERATIONS.md); the probes and a scrape with
    # the bearer token are answered by middleware before these (flaskweb/health.py)
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
]

handler404 = "flaskweb.views.not_found"
# a lost database or Redis is a 503 with Retry-After, not a 500 (flaskweb/unavailable.py)
handler500 = "flaskweb.unavailable.server_error"
