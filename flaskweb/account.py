"""The signed-in user's own API token: create, rotate, revoke (any role: annotators use
it for crowd front-ends, researchers for notebooks). The key is shown once, in the answer
to the request that made it; afterwards the page names only its last characters."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

PAGE = "account/token.html"


@transaction.atomic
def token_rotate(*, user) -> Token:
    """A new key for the user; the old one (if any) stops working at once."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


def token_revoke(*, user) -> int:
    return Token.objects.filter(user=user).delete()[0]


@require_http_methods(["GET", "POST"])
@never_cache
@login_required
def api_token(request) -> HttpResponse:
    new_key, notice, status = "", "", 200
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "rotate":
            new_key = token_rotate(user=request.user).key
        elif action == "revoke":
            notice = "Your token is revoked." if token_revoke(user=request.user) else ""
            notice = notice or "You had no token."
        else:
            notice, status = "Unknown action: create, rotate or revoke a token.", 400
    token = Token.objects.filter(user=request.user).first()
    context = {"token": token, "new_key": new_key, "notice": notice}
    template = f"{PAGE}#token-panel" if getattr(request, "htmx", False) else PAGE
    return render(request, template, context, status=status)
