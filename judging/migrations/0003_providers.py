"""Judge credentials become an operator's decision (docs/JUDGING.md, "Providers").

Every distinct (base URL, key variable) of the existing LLM judges becomes one Provider,
*unapproved*: a researcher chose those values, so no call goes out with them until a site
admin has looked at the provider in the admin and approved it (or pointed the judges at
another). Rate limits move to the provider (the lowest any of its judges set), as they are
the account's. Then the judges' own key-variable field goes: nothing a researcher sets
names an environment variable any more.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.utils.text import slugify


def judges_to_providers(apps, schema_editor):
    JudgeConfig = apps.get_model("judging", "JudgeConfig")
    Provider = apps.get_model("judging", "Provider")
    made = {}
    for judge in JudgeConfig.objects.filter(kind="llm").order_by("pk"):
        key = (judge.base_url, judge.api_key_env)
        provider = made.get(key)
        if provider is None:
            base = slugify(judge.base_url.split("//", 1)[-1].split("/", 1)[0])[:40] or "provider"
            name, n = base, 1
            while Provider.objects.filter(name=name).exists():
                n += 1
                name = f"{base}-{n}"
            provider = made[key] = Provider.objects.create(
                name=name,
                label=f"{judge.base_url} (from existing judges)",
                base_urls=[judge.base_url] if judge.base_url else [],
                api_key_env=judge.api_key_env,
                approved=False,
                note="Made from existing judges when providers were introduced: check the "
                "URL and the key's variable, then approve.",
            )
        for limit in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(judge, limit)
            if value and (getattr(provider, limit) is None or value < getattr(provider, limit)):
                setattr(provider, limit, value)
        provider.save()
        judge.provider = provider
        judge.save(update_fields=["provider"])


def providers_to_judges(apps, schema_editor):
    JudgeConfig = apps.get_model("judging", "JudgeConfig")
    for judge in JudgeConfig.objects.exclude(provider=None).select_related("provider"):
        judge.api_key_env = judge.provider.api_key_env
        judge.save(update_fields=["api_key_env"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0009_membership_change'),
        ('judging', '0002_pairwise'),
    ]

    operations = [
        migrations.AddField(
            model_name='llmcacheentry',
            name='project',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.project'),
        ),
        migrations.CreateModel(
            name='Provider',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('updated_at', models.DateTimeField(auto_now=True, db_index=True)),
                ('name', models.SlugField(max_length=60, unique=True)),
                ('label', models.CharField(blank=True, max_length=200)),
                ('base_urls', models.JSONField(default=list)),
                ('api_key_env', models.CharField(blank=True, max_length=100)),
                ('api_key_file', models.CharField(blank=True, max_length=500)),
                ('is_local', models.BooleanField(default=False)),
                ('approved', models.BooleanField(default=False)),
                ('shared_cache', models.BooleanField(default=False)),
                ('prices', models.JSONField(blank=True, default=dict)),
                ('requests_per_minute', models.PositiveIntegerField(blank=True, null=True)),
                ('tokens_per_minute', models.PositiveIntegerField(blank=True, null=True)),
                ('note', models.TextField(blank=True)),
                ('projects', models.ManyToManyField(blank=True, related_name='judge_providers', to='annotation.project')),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='judgeconfig',
            name='provider',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='judges', to='judging.provider'),
        ),
        migrations.AddField(
            model_name='llmcacheentry',
            name='provider',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='judging.provider'),
        ),
        # elidable: it only moves the settings of judges that exist before it; a fresh database
        # has none, so the squashed migration (judging 0001_squashed_0008) leaves it out.
        migrations.RunPython(judges_to_providers, providers_to_judges, elidable=True),
        migrations.RemoveField(
            model_name='judgeconfig',
            name='api_key_env',
        ),
    ]
