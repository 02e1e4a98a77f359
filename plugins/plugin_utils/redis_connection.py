# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the controller connects to Redis (the fact cache's server): the connection
string read once, the same timeouts everywhere, a PING before use, and a clear error naming
what is wrong (the string, the missing ``redis`` package, the server). Used by the host
leases (lease.py) and the shared plans (plan_share.py)."""
from __future__ import annotations

import re
from typing import Any

from ansible_collections.sentinel.remediation.plugins.plugin_utils.requirements import missing_package

# Seconds to connect and to wait for any one answer: a Redis that hangs must not hang a run.
TIMEOUT = 5
_URI = re.compile(r"^(?P<host>[^:\[\]]+|\[[^\]]+\]):(?P<port>\d+):(?P<db>\d+)(?::(?P<password>.*))?$")


class RedisUnavailable(Exception):
    """The Redis named cannot be used; the message says why."""


def redis_options(uri: str) -> dict:
    """Client options from the Redis fact cache's connection string.

    The format is the one the ``community.general.redis`` cache documents:
    ``[tls://]host:port:db[:password]``. Redis Sentinel (``;`` separated) is not
    supported.
    """
    text = str(uri or "").strip()
    options: dict[str, Any] = {}
    if text.startswith("tls://"):
        options["ssl"] = True
        text = text[len("tls://"):]
    if ";" in text:
        raise RedisUnavailable("a Redis Sentinel connection string (;-separated) is not supported")
    match = _URI.match(text)
    if not match:
        raise RedisUnavailable(f"cannot read the Redis connection {str(uri)!r} (expected host:port:db[:password])")
    options.update(host=match["host"].strip("[]"), port=int(match["port"]), db=int(match["db"]))
    if match["password"]:
        options["password"] = match["password"]
    return options


def connect(uri: str, purpose: str = "Redis"):
    """A client of the Redis at ``uri`` that answered a PING; ``RedisUnavailable`` naming
    why (for ``purpose``) when the string, the ``redis`` package or the server is not usable."""
    options: dict[str, Any] = redis_options(uri)
    try:
        import redis  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise RedisUnavailable(f"{purpose}: {missing_package('redis')}") from exc
    client = redis.Redis(socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT, **options)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise RedisUnavailable(f"Redis at {options['host']}:{options['port']} did not answer: {exc}") from exc
    return client


def errors() -> type[Exception]:
    """The exception every Redis client error derives from (``redis.RedisError``)."""
    import redis  # pylint: disable=import-outside-toplevel

    return redis.RedisError
