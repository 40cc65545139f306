"""Who may see what: fetch an object and enforce who may see it (404 for objects the
user may not know about, 403 for a known object and a wrong role), and the one rule of who
is in a campaign's annotator pool (the claim, the annotator's pages and API, the campaign
page and re-annotation all read it from here)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from annotation.models import (
    Campaign,
    Dataset,
    DatasetUpload,
    Item,
    Project,
    ProjectMembership,
    ProjectRole,
)
from annotation.selectors import item_get
from flaskweb.db import fetch_one

STAFF_ROLES = {ProjectRole.ADMIN, ProjectRole.RESEARCHER}
#: Who may open a campaign's review queue and adjudicate (annotation/review/): the staff and
#: the project's reviewers. Reviewers get nothing else of the staff's (datasets, judges,
#: analytics, campaign settings stay 403 to them).
REVIEW_ROLES = {ProjectRole.ADMIN, ProjectRole.RESEARCHER, ProjectRole.REVIEWER}


def is_site_admin(user) -> bool:
    """Admins of the whole site: every project, and creating projects."""
    return user.is_authenticated and (user.is_superuser or user.is_staff)


def project_exists(slug: str) -> bool:
    return Project.objects.filter(slug=slug).exists()


def project_role(user, project: Project) -> str | None:
    if is_site_admin(user):
        return ProjectRole.ADMIN
    membership = ProjectMembership.objects.filter(project=project, user=user).first()
    return membership.role if membership else None


def project_require_role(user, project: Project, *, what: str, roles=STAFF_ROLES) -> str:
    """The one access rule for everything a project owns: 404 ("no such <what>") for a
    user with no role in the project, 403 for a role not in `roles`; returns the role.
    Every app's object fetchers (annotation, judging, analytics) end here."""
    role = project_role(user, project)
    if role is None:
        raise Http404(f"no such {what}")
    if role not in roles:
        raise PermissionDenied("your role in this project does not allow this")
    return role


def project_get_for_user(user, slug: str, *, roles=STAFF_ROLES) -> tuple[Project, str]:
    project = get_object_or_404(Project, slug=slug)
    return project, project_require_role(user, project, what="project", roles=roles)


def project_get_for_staff(user, slug: str) -> Project:
    """The project, for its admins and researchers (404 for others, 403 for annotators)."""
    return project_get_for_user(user, slug, roles=STAFF_ROLES)[0]


def project_get_for_admin(user, slug: str) -> Project:
    return project_get_for_user(user, slug, roles={ProjectRole.ADMIN})[0]


def dataset_get_for_user(user, dataset_id: int) -> tuple[Dataset, str]:
    dataset = get_object_or_404(Dataset.objects.select_related("project"), pk=dataset_id)
    _, role = project_get_for_user(user, dataset.project.slug)
    return dataset, role


def item_get_for_user(user, item_id: int) -> Item:
    try:
        item = item_get(item_id=item_id)
    except Item.DoesNotExist:
        raise Http404("no such item") from None
    project_get_for_user(user, item.dataset.project.slug)
    return item


def upload_get_for_staff(user, upload_id: int) -> DatasetUpload:
    upload = get_object_or_404(DatasetUpload.objects.select_related("project"), pk=upload_id)
    project_get_for_user(user, upload.project.slug)
    return upload


def campaign_get_for_staff(user, pk: int) -> Campaign:
    """The campaign, if `user` is an admin or researcher of its project: 404 for unknown
    ids and non-members, 403 for annotators. Pre-joins the project and dataset."""
    campaign = get_object_or_404(Campaign.objects.select_related("project", "dataset"), pk=pk)
    project_require_role(user, campaign.project, what="campaign")
    return campaign


def campaign_get_for_reviewer(user, pk: int) -> tuple[Campaign, str]:
    """The campaign and the user's role, if the user may review it (REVIEW_ROLES): 404 for
    unknown ids and non-members, 403 for annotators. Pre-joins the project and dataset."""
    campaign = get_object_or_404(Campaign.objects.select_related("project", "dataset"), pk=pk)
    role = project_require_role(user, campaign.project, what="campaign", roles=REVIEW_ROLES)
    return campaign, role


# --- a campaign's annotator pool -----------------------------------------------------------

_POOL_USERS = Campaign.annotators.through._meta.db_table
_POOL_GROUPS = Campaign.groups.through._meta.db_table
_USER_GROUPS = get_user_model().groups.through._meta.db_table

_MEMBERS = ProjectMembership._meta.db_table

#: SQL for "the pool of campaign `c` holds the user": named in its annotator list, or a
#: member of one of its groups who holds a role in the project (a group is site-wide; it
#: admits no one from outside the project). For the raw statements of the hot path; takes
#: the user id twice as parameters.
IN_POOL_SQL = f"""(
 EXISTS (SELECT 1 FROM {_POOL_USERS} p WHERE p.campaign_id = c.id AND p.user_id = %s)
 OR EXISTS (SELECT 1 FROM {_POOL_GROUPS} g JOIN {_USER_GROUPS} ug ON ug.group_id = g.group_id
            JOIN {_MEMBERS} m ON m.user_id = ug.user_id AND m.project_id = c.project_id
            WHERE g.campaign_id = c.id AND ug.user_id = %s))"""


def campaign_pool_for_user(*, user) -> QuerySet[Campaign]:
    """Campaigns whose pool holds the user, directly or through a group (the rule of
    IN_POOL_SQL below, as one query without duplicate rows).
    A project role alone does not put anyone in a pool."""
    direct = Campaign.annotators.through.objects.filter(campaign_id=OuterRef("pk"), user_id=user.pk)
    via_group = Campaign.groups.through.objects.filter(
        campaign_id=OuterRef("pk"), group__user=user.pk
    )
    member = ProjectMembership.objects.filter(project_id=OuterRef("project_id"), user_id=user.pk)
    return Campaign.objects.filter(Q(Exists(direct)) | (Q(Exists(via_group)) & Q(Exists(member))))


def campaign_get_for_annotator(*, user, campaign_id: int) -> Campaign:
    """The campaign if the user is in its pool; raises Campaign.DoesNotExist otherwise."""
    return campaign_pool_for_user(user=user).get(pk=campaign_id)


_IN_POOL = f"SELECT c.id FROM {Campaign._meta.db_table} c WHERE c.id = %s AND {IN_POOL_SQL}"


def campaign_in_pool(*, user, campaign_id: int) -> bool:
    """Whether the campaign exists and its pool holds the user (one raw statement: this
    guards every API claim)."""
    return fetch_one(_IN_POOL, [campaign_id, user.pk, user.pk]) is not None


def campaign_pool_list(*, campaign: Campaign) -> list[tuple[int, str]]:
    """(user id, username) of everyone in the pool: named annotators, and the members of
    its groups who hold a role in the project (the rule of IN_POOL_SQL)."""
    via_group = Q(groups__campaigns=campaign, memberships__project_id=campaign.project_id)
    users = (
        get_user_model()
        .objects.filter(Q(campaigns=campaign) | via_group)
        .order_by("username")
        .values_list("pk", "username")
        .distinct()
    )
    return list(users)
