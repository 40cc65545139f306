# Exports as Parquet (format parquet) and as a Hugging Face datasets layout (kind
# hf_dataset, format zip): docs/EXPORTS.md.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('analytics', '0008_selection_plan'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='exportjob',
            name='exportjob_format_valid',
        ),
        migrations.RemoveConstraint(
            model_name='exportjob',
            name='exportjob_kind_valid',
        ),
        migrations.AlterField(
            model_name='exportjob',
            name='format',
            field=models.CharField(choices=[('csv', 'CSV'), ('jsonl', 'JSON Lines'), ('parquet', 'Parquet'), ('zip', 'Zip archive')], max_length=10),
        ),
        migrations.AlterField(
            model_name='exportjob',
            name='kind',
            field=models.CharField(choices=[('long', 'Long table (one row per score)'), ('flask_review', 'FLASK review file (one judge)'), ('wide', 'Wide table (one column per rater)'), ('preferences', 'Preferences (one row per pairwise label)'), ('judge_training', "Judge-training tasks (people's judgments)"), ('hf_dataset', 'Hugging Face dataset (Parquet files and a dataset card, zipped)')], max_length=20),
        ),
        migrations.AddConstraint(
            model_name='exportjob',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['long', 'flask_review', 'wide', 'preferences', 'judge_training', 'hf_dataset'])), name='exportjob_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='exportjob',
            constraint=models.CheckConstraint(condition=models.Q(('format__in', ['csv', 'jsonl', 'parquet', 'zip'])), name='exportjob_format_valid'),
        ),
    ]
