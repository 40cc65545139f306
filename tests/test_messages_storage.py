"""The message storage (flaskweb/messages.py): Django's cookie-then-session storage, made on
first use. A request that neither adds nor reads a message makes neither storage and sets
no cookie; one that does behaves as Django's FallbackStorage."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpResponse
from django.test import RequestFactory

from flaskweb.messages import LazyFallbackStorage


def _through(view, cookies=None):
    request = RequestFactory().get("/")
    request.COOKIES.update(cookies or {})
    handler = SessionMiddleware(MessageMiddleware(view))
    return request, handler(request)


def test_the_configured_storage_is_the_lazy_one():
    assert isinstance(default_storage(RequestFactory().get("/")), LazyFallbackStorage)


@pytest.mark.django_db
def test_a_request_that_never_touches_messages_makes_no_storage_and_sets_no_cookie():
    request, response = _through(lambda request: HttpResponse("ok"))
    assert "storages" not in request._messages.__dict__
    assert "messages" not in response.cookies


@pytest.mark.django_db
def test_a_message_added_is_shown_on_the_next_request_once():
    def add(request):
        messages.success(request, "Saved.")
        return HttpResponse("ok")

    _request, response = _through(add)
    cookie = response.cookies["messages"].value
    shown = []

    def show(request):
        shown.append([str(m) for m in messages.get_messages(request)])
        return HttpResponse("ok")

    _request, after = _through(show, {"messages": cookie})
    assert shown == [["Saved."]]
    # read: the cookie is emptied, as Django's storage does
    assert after.cookies["messages"].value == ""


@pytest.mark.django_db
def test_it_stores_as_djangos_fallback_storage_does():
    """The same messages give the same cookie (the session takes what does not fit)."""
    for storage_class in (LazyFallbackStorage, FallbackStorage):
        request = RequestFactory().get("/")
        SessionMiddleware(lambda r: HttpResponse())(request)
        storage = storage_class(request)
        storage.add(messages.INFO, "one")
        storage.add(messages.WARNING, "two")
        response = HttpResponse()
        storage.update(response)
        value = response.cookies["messages"].value
        request = RequestFactory().get("/")
        request.COOKIES["messages"] = value
        SessionMiddleware(lambda r: HttpResponse())(request)
        assert [(m.level, str(m)) for m in storage_class(request)] == [
            (messages.INFO, "one"),
            (messages.WARNING, "two"),
        ]
