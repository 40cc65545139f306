"""A Python client for the flaskweb REST API (docs/PYTHON_CLIENT.md in the flaskweb
repository): projects, dataset uploads, campaigns and judge runs, followed with a progress
bar; the analytics report, judge scores and exports as pandas DataFrames; scores made
elsewhere pushed back."""

from flaskweb_client._errors import (
    AuthenticationError,
    BadRequestError,
    ClientError,
    ConflictError,
    FlaskwebError,
    JobFailedError,
    JobTimeoutError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
    UnsupportedMediaTypeError,
)
from flaskweb_client.client import Client, Report

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ClientError",
    "ConflictError",
    "FlaskwebError",
    "JobFailedError",
    "JobTimeoutError",
    "MethodNotAllowedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "Report",
    "ServerError",
    "ServiceUnavailableError",
    "UnsupportedMediaTypeError",
    "__version__",
]
