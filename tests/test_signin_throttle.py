"""Sign-in throttling (flaskweb.security): one rule for /login/ and the Django admin's login,
keyed on the username as Django's login form reads it (NFKC) and case-folded, counted
atomically so parallel attempts cannot all pass the check."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.db import connections
from django.test import Client

from flaskweb.security import signin_keys, signin_username_key

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counts(settings):
    """Counters of this test only: a key prefix of its own (clearing the cache would wipe
    the Redis database that parallel test processes share)."""
    default = settings.CACHES["default"]
    prefix = f"{default.get('KEY_PREFIX', '')}-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {**settings.CACHES, "default": {**default, "KEY_PREFIX": prefix}}


def _login(username: str, password: str, address: str = "10.0.0.1", path: str = "/login/"):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def _signed_in(response) -> bool:
    return "_auth_user_id" in response.wsgi_request.session


# --- one username, one address ---------------------------------------------------------------


def test_a_username_is_locked_after_repeated_failures_even_with_the_right_password(
    researcher, settings
):
    settings.LOGIN_FAILURES_PER_USER = 3
    for _ in range(3):
        assert _login("rita", "wrong").status_code == 200  # the form again, with its error
    refused = _login("rita", "pw-rita")
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode()
    assert not _signed_in(refused)
    # from another address too: the count is the username's
    assert _login("rita", "pw-rita", address="10.9.9.9").status_code == 429


def test_the_lock_ends_with_its_window_and_a_success_clears_the_count(researcher, settings):
    settings.LOGIN_FAILURES_PER_USER = 3
    for _ in range(2):
        _login("rita", "wrong")
    assert _login("rita", "pw-rita").status_code == 302  # success: count cleared
    for _ in range(2):
        _login("rita", "wrong")
    assert _login("rita", "pw-rita").status_code == 302  # not locked: it started afresh
    for _ in range(3):
        _login("rita", "wrong")
    assert _login("rita", "pw-rita").status_code == 429
    cache.delete_many(signin_keys(username="rita", address="10.0.0.1"))  # the window is over
    assert _login("rita", "pw-rita").status_code == 302


def test_the_lock_ends_when_the_window_from_the_first_failure_is_over(researcher, settings):
    """The window starts with the first failure (the counter's expiry is set when it is
    made) and is not pushed back by later attempts."""
    settings.LOGIN_FAILURES_PER_USER = 2
    settings.LOGIN_FAILURE_WINDOW = 1
    for _ in range(2):
        _login("rita", "wrong")
    assert _login("rita", "pw-rita").status_code == 429
    time.sleep(1.2)
    assert _login("rita", "pw-rita").status_code == 302


def test_one_address_trying_many_usernames_is_refused(researcher, settings):
    settings.LOGIN_FAILURES_PER_ADDRESS = 4
    for n in range(4):
        assert _login(f"guess{n}", "x", address="10.6.6.6").status_code == 200
    assert _login("rita", "pw-rita", address="10.6.6.6").status_code == 429
    assert _login("rita", "pw-rita", address="10.7.7.7").status_code == 302


def test_successful_sign_ins_do_not_use_up_the_addresss_allowance(researcher, settings):
    """Attempts are counted before the password is checked; a success gives its count back."""
    settings.LOGIN_FAILURES_PER_ADDRESS = 2
    for _ in range(5):
        assert _login("rita", "pw-rita", address="10.5.5.5").status_code == 302


# --- look-alike usernames --------------------------------------------------------------------


LOOK_ALIKES = {
    "fullwidth": "\uff52\uff49\uff54\uff41",  # ｒｉｔａ
    "mathematical bold": "\U0001d42b\U0001d422\U0001d42d\U0001d41a",  # 𝐫𝐢𝐭𝐚
    "mathematical bold capitals": "\U0001d411\U0001d408\U0001d413\U0001d400",  # 𝐑𝐈𝐓𝐀
    "capitals": "RITA",
    "padded": "  rita\u3000",
}


@pytest.mark.parametrize("look_alike", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_a_look_alike_of_a_locked_username_is_locked_too(researcher, settings, look_alike):
    # given rita locked out
    settings.LOGIN_FAILURES_PER_USER = 3
    for _ in range(3):
        _login("rita", "wrong")
    # when the right password comes with a username Django's login form reads as "rita"
    response = _login(look_alike, "pw-rita", address="10.3.3.3")
    # then it is refused without checking the password
    assert response.status_code == 429
    assert not _signed_in(response)


@pytest.mark.parametrize("look_alike", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_failures_under_look_alikes_count_for_the_username(researcher, settings, look_alike):
    settings.LOGIN_FAILURES_PER_USER = 3
    for n in range(3):
        _login(look_alike, "wrong", address=f"10.4.4.{n}")
    assert _login("rita", "pw-rita").status_code == 429


def test_the_key_is_the_nfkc_case_folded_username():
    keys = {signin_username_key(name) for name in LOOK_ALIKES.values()}
    assert keys == {signin_username_key("rita")}
    assert signin_username_key("rita") != signin_username_key("ritb")


# --- the Django admin's login ------------------------------------------------------------------


def test_the_admin_login_is_locked_after_repeated_failures_even_with_the_right_password(
    admin_user, settings
):
    settings.LOGIN_FAILURES_PER_USER = 3
    for _ in range(3):
        assert _login("admin", "wrong", path="/admin/login/").status_code == 200
    refused = _login("admin", "pw-admin", path="/admin/login/")
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode()
    assert not _signed_in(refused)


def test_failures_on_either_login_page_count_for_both(admin_user, settings):
    settings.LOGIN_FAILURES_PER_USER = 3
    _login("admin", "wrong", path="/admin/login/")
    _login("\uff41\uff44\uff4d\uff49\uff4e", "wrong")  # ａｄｍｉｎ on /login/
    _login("ADMIN", "wrong", path="/admin/login/")
    assert _login("admin", "pw-admin").status_code == 429
    assert _login("admin", "pw-admin", path="/admin/login/").status_code == 429


def test_the_admin_login_still_signs_a_site_admin_in(admin_user):
    response = _login("admin", "pw-admin", path="/admin/login/")
    assert response.status_code == 302 and _signed_in(response)


# --- parallel attempts ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_parallel_wrong_attempts_check_no_more_passwords_than_the_limit(
    researcher, settings, monkeypatch
):
    """16 attempts at once against a limit of 5: each reserves its place in the count before
    the password is checked, so at most 5 reach the password check (on the real Redis
    cache). The check is slowed down so that all attempts are in flight together."""
    settings.LOGIN_FAILURES_PER_USER = 5
    checked = []
    real_authenticate = ModelBackend.authenticate

    def slow_authenticate(self, request, username=None, password=None, **kwargs):
        checked.append(username)
        time.sleep(0.2)
        return real_authenticate(self, request, username=username, password=password, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", slow_authenticate)
    statuses: list[int] = []
    start = threading.Barrier(16)

    def attempt(n: int) -> None:
        try:
            start.wait()
            statuses.append(_login("rita", f"wrong-{n}", address=f"10.8.0.{n}").status_code)
        finally:
            connections.close_all()

    # when
    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then
    assert len(checked) <= 5
    assert sorted(statuses) == [200] * len(checked) + [429] * (16 - len(checked))
    assert _login("rita", "pw-rita").status_code == 429
