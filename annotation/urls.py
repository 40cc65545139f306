"""The annotation app's URLs: each feature package's pages (urlpatterns, under the
"annotation" namespace) and APIs (api_urlpatterns, mounted under /api/v1/annotation/ by
flaskweb/urls.py)."""

from annotation.annotate import urls as annotate
from annotation.campaigns import urls as campaigns
from annotation.catalogue import urls as catalogue
from annotation.datasets import urls as datasets
from annotation.languages import urls as languages
from annotation.members import urls as members
from annotation.metadata import urls as metadata
from annotation.pace import urls as pace
from annotation.projects import urls as projects
from annotation.review import urls as review
from annotation.screening import urls as screening
from annotation.study import urls as study

app_name = "annotation"

_FEATURES = (
    projects,
    datasets,
    catalogue,
    members,
    annotate,
    campaigns,
    pace,
    screening,
    review,
    study,
    metadata,
    languages,
)

urlpatterns = [pattern for feature in _FEATURES for pattern in feature.urlpatterns]

api_urlpatterns = [pattern for feature in _FEATURES for pattern in feature.api_urlpatterns]
