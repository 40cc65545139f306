"""Judge configurations compared (docs/JUDGE_COMPARISON.md): chosen judges side by side on
the same responses. figures.py: the pure figures; selectors.py: their inputs from the
project's rows and judges; views.py: the page; apis.py: the JSON."""
