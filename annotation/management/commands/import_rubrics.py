"""python manage.py import_rubrics FILE --project SLUG — a rubric file in the FLASK skill-set
format becomes project rubric versions (and custom skills for unknown names). All or nothing."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.catalogue.services import RubricFileError, rubric_import_flask
from annotation.models import Project


class Command(BaseCommand):
    help = "Import a rubric file in the official FLASK skill-set format into a project."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--project", required=True)

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"project {opts['project']!r} does not exist")
        try:
            result = rubric_import_flask(project=project, data=Path(opts["file"]).read_bytes())
        except OSError as exc:
            raise CommandError(f"{opts['file']}: {exc.strerror}") from None
        except (RubricFileError, ValidationError) as exc:
            raise CommandError(f"{opts['file']}: {exc}") from None
        self.stdout.write(
            f"new skills: {', '.join(result.created_skills) or '-'}\n"
            f"new rubric versions: {', '.join(result.new_versions) or '-'}\n"
            f"unchanged: {', '.join(result.unchanged) or '-'}"
        )
