from django.urls import path

from analytics.metadata import apis, views

urlpatterns = [
    path(
        "datasets/<int:pk>/metadata/agreement/",
        views.metadata_agreement_page,
        name="metadata-agreement",
    ),
    path(
        "datasets/<int:pk>/metadata/agreement.csv",
        views.metadata_agreement_csv,
        name="metadata-agreement-csv",
    ),
]

api_urlpatterns = [
    path(
        "datasets/<int:pk>/metadata/agreement",
        apis.MetadataAgreementApi.as_view(),
        name="metadata-agreement",
    ),
]
