"""URLs of the dataset, item and upload pages and of the datasets API (api_urlpatterns,
mounted under /api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.datasets import apis, views

urlpatterns = [
    path("projects/<slug:slug>/uploads/new/", views.upload_create, name="upload-create"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset-detail"),
    path("items/<int:pk>/", views.item_detail, name="item-detail"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload-detail"),
]

api_urlpatterns = [
    path("projects/<slug:slug>/datasets/", apis.DatasetListApi.as_view(), name="api-dataset-list"),
    path("datasets/<int:pk>/", apis.DatasetDetailApi.as_view(), name="api-dataset"),
    path("datasets/<int:pk>/items/", apis.ItemListApi.as_view(), name="api-item-list"),
    path("items/<int:pk>/", apis.ItemDetailApi.as_view(), name="api-item"),
    path("uploads/", apis.UploadCreateApi.as_view(), name="api-upload-create"),
    path("uploads/<int:pk>/", apis.UploadDetailApi.as_view(), name="api-upload-detail"),
]
