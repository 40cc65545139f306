"""`sees_judge_leaderboard`: whether to offer the judge leaderboard (a site admin, or an
admin or researcher of at least one project; one query)."""

from django import template

from annotation.access import STAFF_ROLES, is_site_admin
from annotation.models import ProjectMembership

register = template.Library()


@register.filter
def sees_judge_leaderboard(user) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    if is_site_admin(user):
        return True
    return ProjectMembership.objects.filter(user=user, role__in=STAFF_ROLES).exists()
