import pytest
from django.contrib import admin
from django.urls import reverse


@pytest.mark.parametrize(
    "model", [m for m in admin.site._registry if m._meta.app_label == "annotation"]
)
def test_every_annotation_admin_changelist_renders_for_site_admins(admin_client, model):
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert admin_client.get(url).status_code == 200


def test_the_admin_is_closed_to_project_researchers(researcher_client):
    response = researcher_client.get(reverse("admin:index"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
