"""Request bodies refused by size before they are read (flaskweb.request_limits): small
bodies everywhere, uploads up to FLASKWEB_MAX_UPLOAD_BYTES of files per request on the
upload endpoints, 413 before the CSRF middleware or a view reads a byte."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from django.test import Client
from django.urls import path, resolve
from django.views.decorators.csrf import csrf_exempt

from flaskweb.request_limits import UPLOAD_URL_NAMES
from tests.clients import token_client

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


class UnreadableInput(io.RawIOBase):
    """A wsgi.input that fails the test if anything reads it."""

    def read(self, size=-1):
        raise AssertionError("the body was read")

    readline = read


class EndlessInput(io.RawIOBase):
    """A chunked body of 64 MiB (endless, for the limits here); counts what was read."""

    def __init__(self):
        self.count = 0

    def read(self, size=-1):
        size = 64 * 1024 if size is None or size < 0 else min(size, 64 * 1024)
        size = min(size, 64 * MIB - self.count)
        self.count += size
        return b"a" * size

    readline = read


def _declared(client: Client, url: str, length: int, **extra):
    """A POST that declares `length` bytes and has a body nobody may read."""
    return client.post(
        url,
        data="x",
        content_type="multipart/form-data; boundary=BoUnDaRy",
        CONTENT_LENGTH=str(length),
        **{"wsgi.input": UnreadableInput()},
        **extra,
    )


# --- declared too large: refused unread -------------------------------------------------------


def test_a_huge_anonymous_post_to_the_login_page_is_refused_unread(client):
    response = _declared(client, "/login/", 300 * MIB)
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/plain")
    assert b"larger than 2,097,152 bytes" in response.content
    assert response["Content-Security-Policy"]  # answered inside the header middleware


def test_a_huge_post_to_an_api_is_refused_unread_in_the_apis_error_shape(researcher, project):
    url = f"/api/v1/annotation/projects/{project.slug}/campaigns/"
    response = _declared(token_client(researcher), url, 3 * MIB)
    assert response.status_code == 413
    body = response.json()
    assert body["code"] == "too_large" and "2,097,152 bytes" in body["detail"]


def test_a_signed_in_user_gets_only_the_small_limit_outside_the_upload_endpoints(
    researcher_client, project
):
    url = f"/projects/{project.slug}/skills/new/"
    assert _declared(researcher_client, url, 2 * MIB + 1).status_code == 413


def test_a_body_at_the_limit_is_read(client, settings):
    settings.FLASKWEB_MAX_BODY_BYTES = 64
    ok = client.post(
        "/login/",
        "username=a&password=b".ljust(64, "&"),
        content_type="application/x-www-form-urlencoded",
    )
    assert ok.status_code == 200  # the form again (wrong password), not 413
    over = client.post(
        "/login/",
        "username=a&password=b".ljust(65, "&"),
        content_type="application/x-www-form-urlencoded",
    )
    assert over.status_code == 413


# --- the upload endpoints ------------------------------------------------------------------------

UPLOAD_PATHS = {
    "annotation:upload-create": "/projects/{slug}/uploads/new/",
    "annotation-api:api-upload-create": "/api/v1/annotation/uploads/",
    "annotation:rubric-import": "/projects/{slug}/rubrics/import/",
    "judging:template-import": "/projects/{slug}/judge-templates/import/",
    "judging-api:judge-output-import": "/api/v1/judging/projects/{slug}/judge-outputs/import/",
    "analytics:score-import": "/projects/{slug}/analytics/scores/import/",
    "analytics-api:score-import": "/api/v1/projects/{slug}/scores/import/",
    "analytics:preference-import": "/projects/{slug}/analytics/preferences/import/",
    "analytics-api:preference-import": "/api/v1/projects/{slug}/preferences/import/",
}
FIELD = {
    "annotation:rubric-import": "file",
    "judging:template-import": "file",
    "analytics:preference-import": "file",
    "analytics-api:preference-import": "file",
}


def test_the_upload_endpoints_are_the_named_routes():
    assert set(UPLOAD_PATHS) == UPLOAD_URL_NAMES
    for name, url in UPLOAD_PATHS.items():
        assert resolve(url.format(slug="p")).view_name == name


@pytest.mark.parametrize("name", sorted(UPLOAD_PATHS))
def test_an_upload_endpoint_takes_files_over_the_small_limit(admin_client, project, settings, name):
    settings.FLASKWEB_MAX_BODY_BYTES = 1024
    url = UPLOAD_PATHS[name].format(slug=project.slug)
    upload = SimpleUploadedFile("big.jsonl", b"{}\n" * 4000)
    response = admin_client.post(url, {FIELD.get(name, "files"): [upload], "dataset": "D"})
    assert response.status_code not in (413, 500), response.content[:300]


@pytest.mark.parametrize("name", sorted(UPLOAD_PATHS))
def test_an_upload_endpoint_refuses_a_request_over_the_upload_total_unread(
    admin_client, project, settings, name
):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 10 * MIB
    url = UPLOAD_PATHS[name].format(slug=project.slug)
    response = _declared(admin_client, url, 10 * MIB + 2 * MIB + 1)
    assert response.status_code == 413
    if url.startswith("/api/"):
        assert response.json()["code"] == "too_large"


@pytest.mark.parametrize("name", sorted(UPLOAD_PATHS))
def test_an_anonymous_upload_over_the_small_limit_is_refused_unread(client, project, name):
    url = UPLOAD_PATHS[name].format(slug=project.slug)
    assert _declared(client, url, 2 * MIB + 1).status_code == 413


@pytest.mark.parametrize("name", sorted(UPLOAD_PATHS))
def test_an_upload_endpoint_lets_a_request_at_the_upload_total_through(
    admin_client, project, settings, name
):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 10 * MIB
    url = UPLOAD_PATHS[name].format(slug=project.slug)
    # a body that ends early: the view reads it (and refuses what it got)
    response = admin_client.post(
        url,
        data="x",
        content_type="multipart/form-data; boundary=BoUnDaRy",
        CONTENT_LENGTH=str(10 * MIB + 2 * MIB),
        **{"wsgi.input": io.BytesIO(b"--BoUnDaRy--\r\n")},
    )
    assert response.status_code not in (413, 500)


def test_a_token_request_may_upload(admin_user, project):
    response = token_client(admin_user).post(
        "/api/v1/annotation/uploads/",
        data="x",
        content_type="multipart/form-data; boundary=BoUnDaRy",
        CONTENT_LENGTH=str(3 * MIB),
        **{"wsgi.input": io.BytesIO(b"--BoUnDaRy--\r\n")},
    )
    assert response.status_code == 400  # no files: read, and refused by the API


# --- many files together -------------------------------------------------------------------------


def _files(count: int, size: int) -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(f"f{n}.jsonl", b"\n" * size) for n in range(count)]


def test_a_hundred_files_each_under_the_limit_but_together_over_it_are_refused_unread(
    admin_client, project, settings
):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 64 * 1024
    settings.FLASKWEB_MAX_BODY_BYTES = 16 * 1024
    url = f"/projects/{project.slug}/uploads/new/"
    response = admin_client.post(url, {"dataset": "D", "files": _files(100, 60 * 1024)})
    assert response.status_code == 413


def test_the_dataset_upload_page_counts_its_files_together(admin_client, project, settings):
    # files over the total by less than the form-field allowance reach the form
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 64 * 1024
    url = f"/projects/{project.slug}/uploads/new/"
    response = admin_client.post(url, {"dataset": "D", "files": _files(10, 7 * 1024)})
    assert response.status_code == 200
    (error,) = response.context["form"].errors["files"]
    assert "10 files are 71,680 bytes together; the limit is 65,536 bytes" in error


def test_the_score_import_page_counts_its_files_together(admin_client, project, settings):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 64 * 1024
    url = f"/projects/{project.slug}/analytics/scores/import/"
    response = admin_client.post(url, {"files": _files(10, 7 * 1024)})
    assert response.status_code == 400
    assert "the limit is 65,536 bytes" in response.context["form"].errors["files"][0]


def test_the_dataset_upload_api_counts_its_files_together(admin_user, project, settings):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 64 * 1024
    body = {"project": project.slug, "dataset": "D", "files": _files(10, 7 * 1024)}
    response = token_client(admin_user).post("/api/v1/annotation/uploads/", body)
    assert response.status_code == 400
    assert "together" in response.json()["files"][0]


# --- bodies without a Content-Length -------------------------------------------------------------


@csrf_exempt
def _read_raw_input(request):
    """Reads wsgi.input to its end, as a server or handler that takes chunked bodies does."""
    stream, read = request.environ["wsgi.input"], 0
    while chunk := stream.read(64 * 1024):
        read += len(chunk)
    return HttpResponse(str(read))


urlpatterns = [path("raw/", _read_raw_input)]


def _chunked(client: Client, url: str, body):
    return client.generic(
        "POST",
        url,
        CONTENT_TYPE="application/octet-stream",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": body},
    )


@pytest.mark.urls(__name__)
def test_a_chunked_body_read_past_the_limit_is_refused(client, settings):
    settings.FLASKWEB_MAX_BODY_BYTES = 100_000
    body = EndlessInput()
    response = _chunked(client, "/raw/", body)
    assert response.status_code == 413
    assert body.count <= 100_001  # never asked for more than one byte past the limit


@pytest.mark.urls(__name__)
def test_a_chunked_body_within_the_limit_is_read(client, settings):
    settings.FLASKWEB_MAX_BODY_BYTES = 100_000
    response = _chunked(client, "/raw/", io.BytesIO(b"a" * 100_000))
    assert response.status_code == 200 and response.content == b"100000"


def test_a_chunked_anonymous_post_to_the_login_page_reads_no_more_than_the_limit():
    body = EndlessInput()
    response = _chunked(Client(enforce_csrf_checks=True), "/login/", body)
    assert response.status_code in (403, 413)  # Django reads such a body as empty: CSRF
    assert body.count <= 2 * MIB + 1
