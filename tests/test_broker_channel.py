"""A Redis broker channel used after its connection was torn down (Redis went away while a
worker held late-acknowledged judge batches) fails with a connection error, which Celery
handles by reconnecting, not with the AttributeError that made it exit the worker
(flaskweb/celery.py; bench/fault_bench.py scenario d)."""

from __future__ import annotations

import pytest
from django.conf import settings
from kombu import Connection
from redis.exceptions import ConnectionError as RedisConnectionError

import flaskweb.celery  # noqa: F401  (the worker's setup: the channel guard)


@pytest.mark.skipif(not settings.REDIS_URL, reason="the embedded default has no Redis broker")
def test_a_channel_whose_connection_was_torn_down_raises_a_connection_error():
    # given a channel on the real broker whose connection the consumer has since closed
    connection = Connection(settings.REDIS_URL)
    channel = connection.channel()
    try:
        channel.qos._delivered["tag"] = None  # an unacknowledged message it still holds
        transport = channel.connection
        transport.client = None  # what kombu leaves when it closes the connection first
        # when the late calls come (restore on close, the ack of a task that finished)
        # then each is a connection error the worker knows how to survive
        assert issubclass(RedisConnectionError, transport.connection_errors)
        with pytest.raises(RedisConnectionError):
            channel.qos.restore_unacked()
        with pytest.raises(RedisConnectionError):
            channel.qos.ack("tag")
    finally:
        channel.qos._delivered.clear()
