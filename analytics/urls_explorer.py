"""Analytics explorer URLs (included by analytics/urls.py)."""

urlpatterns: list = []
api_urlpatterns: list = []
