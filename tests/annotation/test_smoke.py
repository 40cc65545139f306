from annotation.models import Rubric, Skill


def test_the_builtin_catalogue_is_seeded(db):
    assert Skill.objects.filter(project__isnull=True).count() == 12
    assert Rubric.objects.filter(project__isnull=True, version=1).count() == 12
