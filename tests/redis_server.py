"""A real redis-server (Debian's package) on 127.0.0.1 and a free port, for tests."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_missing() -> str | None:
    """Why no redis-server can be started here (None when one can)."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    try:
        import redis  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return "the redis Python package is not installed (requirements.txt)"
    return None


def skip_or_fail_without_redis() -> None:
    import pytest  # pylint: disable=import-outside-toplevel

    reason = redis_missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true)", pytrace=False)
    pytest.skip(reason)


class RedisServer:
    """``with RedisServer(tmp) as server:`` -> ``server.connection`` (host:port:db) and ``server.client``."""

    def __init__(self, directory: Path | str):
        self.directory = str(directory)
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.client = None

    @property
    def connection(self) -> str:
        return f"127.0.0.1:{self.port}:0"

    def start(self) -> RedisServer:
        import redis  # pylint: disable=import-outside-toplevel

        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.directory, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        for _attempt in range(100):
            try:
                self.client.ping()
                return self
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
