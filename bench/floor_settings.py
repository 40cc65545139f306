"""Settings of `annotate_load.py --floor`: the production settings with bench/floor_urls.py
as the URL configuration (the annotator API's next and submit answered by views that do no
work)."""

from flaskweb.settings import *  # noqa: F403

ROOT_URLCONF = "floor_urls"
