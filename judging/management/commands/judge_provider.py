"""Declare or update a judge provider from the command line (what a site admin does in the
Django admin): the API judge calls may go to, where the workers find its key, and whether
it is local, approved and offered to every project or to some.

    manage.py judge_provider openai --url https://api.openai.com/v1 --key-env OPENAI_API_KEY \
        --price gpt-4o-mini=0.00015,0.0006 --rpm 500 --approve
    manage.py judge_provider local-vllm --url http://127.0.0.1:8000/v1 --local --approve \
        --project flask
    manage.py judge_provider --list
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotation.models import Project
from judging.models import Provider
from judging.services import provider_save

#: The option that sets each field provider_save checks, to name it in the error.
OPTIONS = {
    "base_urls": "--url",
    "api_key_env": "--key-env",
    "api_key_file": "--key-file",
    "prices": "--price",
    "requests_per_minute": "--rpm",
    "tokens_per_minute": "--tpm",
}


def _messages(exc: ValidationError) -> str:
    """The service's errors, each after the option it is about ("--key-env: …")."""
    if not hasattr(exc, "error_dict"):
        return "; ".join(exc.messages)
    return "; ".join(
        f"{OPTIONS.get(field, field)}: {message}" if field != "__all__" else message
        for field, messages in exc.message_dict.items()
        for message in messages
    )


class Command(BaseCommand):
    help = "Declare or update a judge provider (site admins' decision); --list shows them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", nargs="?", help="a short name (letters, digits, -)")
        parser.add_argument("--list", action="store_true", help="list the providers")
        parser.add_argument("--label", default=None)
        parser.add_argument("--url", action="append", default=[], help="a base URL (repeat)")
        parser.add_argument("--key-env", default=None, help="NAME of the key's variable")
        parser.add_argument("--key-file", default=None, help="path of the key's secret file")
        parser.add_argument("--no-key", action="store_true", help="the server needs no key")
        parser.add_argument("--local", action="store_true", help="allow private addresses")
        parser.add_argument("--approve", action="store_true")
        parser.add_argument("--unapprove", action="store_true")
        parser.add_argument("--shared-cache", action="store_true")
        parser.add_argument("--project", action="append", default=[], help="slug (repeat)")
        parser.add_argument(
            "--price", action="append", default=[], help="MODEL=PROMPT,COMPLETION per 1k tokens"
        )
        parser.add_argument("--rpm", type=int, default=None)
        parser.add_argument("--tpm", type=int, default=None)

    def handle(self, *args, **options) -> None:
        if options["list"]:
            for p in Provider.objects.prefetch_related("projects"):
                projects = ", ".join(x.slug for x in p.projects.all()) or "every project"
                flags = [
                    "approved" if p.approved else "NOT APPROVED",
                    "local" if p.is_local else "public",
                    "key" if p.needs_key else "no key",
                ]
                self.stdout.write(
                    f"{p.name}: {', '.join(p.base_urls)} ({'; '.join(flags)}; {projects})"
                )
            return
        if not options["name"]:
            raise CommandError("give the provider's name, or --list")
        try:
            with transaction.atomic():
                provider = self._save(options)
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from None
        state = "approved" if provider.approved else "not approved: no call goes out yet"
        self.stdout.write(f"provider {provider.name}: {', '.join(provider.base_urls)} ({state})")

    def _save(self, options) -> Provider:
        provider = Provider.objects.filter(name=options["name"]).first() or Provider(
            name=options["name"]
        )
        if options["url"]:
            provider.base_urls = options["url"]
        if options["label"] is not None:
            provider.label = options["label"]
        if options["no_key"]:
            provider.api_key_env = provider.api_key_file = ""
        if options["key_env"] is not None:
            provider.api_key_env, provider.api_key_file = options["key_env"], ""
        if options["key_file"] is not None:
            provider.api_key_file, provider.api_key_env = options["key_file"], ""
        provider.is_local = options["local"] or provider.is_local
        provider.shared_cache = options["shared_cache"] or provider.shared_cache
        if options["approve"]:
            provider.approved = True
        if options["unapprove"]:
            provider.approved = False
        for entry in options["price"]:
            model, _, pair = entry.partition("=")
            prompt, _, completion = pair.partition(",")
            if not model or not prompt or not completion:
                raise CommandError(f"--price {entry}: write MODEL=PROMPT,COMPLETION")
            provider.prices = {
                **provider.prices,
                model: {"prompt": prompt, "completion": completion},
            }
        if options["rpm"] is not None:
            provider.requests_per_minute = options["rpm"] or None
        if options["tpm"] is not None:
            provider.tokens_per_minute = options["tpm"] or None
        provider_save(provider=provider)
        if options["project"]:
            projects = list(Project.objects.filter(slug__in=options["project"]))
            missing = set(options["project"]) - {p.slug for p in projects}
            if missing:
                raise CommandError(f"no such project: {', '.join(sorted(missing))}")
            provider.projects.set(projects)
        return provider
