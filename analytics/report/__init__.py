"""The analytics report: agreement among people and human-judge correlation (build.py,
resampled.py: pure), the dashboard's tables and charts (chart_data.py: pure), the report
read (selectors.py), the dashboard page (views.py) and the report API (apis.py)."""
