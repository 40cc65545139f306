"""How many labels are enough (docs/LABEL_PLANNING.md): from the labels and judge scores a
project has (the pilot), the human labels each skill needs for a target interval half-width,
for people only, uniform PPI++ and active selection, and the minimum detectable difference
between two systems for a budget. pilot.py is pure; selectors.py reads the rows; the page
(views.py, also a panel on the campaign creation page) and the API (apis.py) show it."""
