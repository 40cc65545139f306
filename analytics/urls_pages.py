"""Analytics pages URLs (included by analytics/urls.py)."""

urlpatterns: list = []
api_urlpatterns: list = []
