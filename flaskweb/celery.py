"""The Celery application: Django settings under the CELERY namespace, tasks autodiscovered."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings")

app = Celery("flaskweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
