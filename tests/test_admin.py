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


def test_a_membership_deleted_in_the_admin_ends_pools_and_leases(
    admin_client, project, annotator, tmp_path
):
    """The admin's inline runs the members page's removal, not a bare row delete."""
    from annotation.campaigns.services import campaign_activate, campaign_create
    from annotation.models import AssignmentStatus, ProjectMembership
    from annotation.services.assignments import assignment_claim_next
    from tests.annotation.test_campaign_selectors import make_dataset

    dataset = make_dataset(project, tmp_path)
    campaign = campaign_create(project=project, dataset=dataset, name="P", annotators=[annotator])
    campaign_activate(campaign=campaign)
    lease = assignment_claim_next(campaign=campaign, annotator=annotator)
    membership = ProjectMembership.objects.get(project=project, user=annotator)
    url = reverse("admin:annotation_project_change", args=[project.pk])
    # when the inline row is ticked for deletion
    response = admin_client.post(
        url,
        {
            "slug": project.slug,
            "name": project.name,
            "description": "",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
            "memberships-0-id": str(membership.pk),
            "memberships-0-project": str(project.pk),
            "memberships-0-user": str(annotator.pk),
            "memberships-0-role": "annotator",
            "memberships-0-DELETE": "on",
        },
    )
    # then
    assert response.status_code == 302, response.content[:2000]
    assert not ProjectMembership.objects.filter(pk=membership.pk).exists()
    assert not campaign.annotators.exists()
    lease.refresh_from_db()
    assert lease.status == AssignmentStatus.EXPIRED
    from annotation.models import MembershipChange

    change = MembershipChange.objects.filter(project=project).latest("id")
    assert (change.username, change.action, change.changed_by.username) == (
        annotator.username,
        "removed",
        "admin",
    )
