"""manage.py prune_rendered_texts: delete stored renderings no current text needs."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotation.services.rendered_texts import rendered_texts_prune


class Command(BaseCommand):
    help = (
        "Delete the stored renderings (annotation.RenderedText) of an earlier renderer "
        "version or of deleted responses and items. Safe while annotators work."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be deleted, delete nothing"
        )

    def handle(self, *args, dry_run: bool = False, **options):
        count = rendered_texts_prune(dry_run=dry_run)
        verb = "would be deleted" if dry_run else "deleted"
        self.stdout.write(f"{count} stored rendering(s) {verb}")
