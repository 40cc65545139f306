"""Seed the built-in FLASK catalogue (12 skills, 10 domains, rubric version 1).

Uses historical models; later wording changes ship as new migrations that call the same
logic, so existing scores keep pointing at the rubric version they were given under.
"""

from django.db import migrations


def seed(apps, schema_editor):
    from annotation import catalogue_text

    Domain = apps.get_model("annotation", "Domain")
    Skill = apps.get_model("annotation", "Skill")
    Rubric = apps.get_model("annotation", "Rubric")
    for order, (key, name, subdomains) in enumerate(catalogue_text.DOMAINS):
        Domain.objects.update_or_create(
            project=None, name=name,
            defaults={"key": key, "subdomains": list(subdomains), "order": order},
        )
    for order, text in enumerate(catalogue_text.SKILLS):
        skill, _ = Skill.objects.update_or_create(
            project=None, name=text.name,
            defaults={"key": text.key, "ability": text.ability, "order": order},
        )
        if not Rubric.objects.filter(skill=skill, project=None).exists():
            a = text.anchors
            Rubric.objects.create(
                skill=skill, project=None, version=1, criterion=text.criterion,
                anchor_1=a[0], anchor_2=a[1], anchor_3=a[2], anchor_4=a[3], anchor_5=a[4],
                source="builtin", note="shipped with flaskweb",
            )


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
