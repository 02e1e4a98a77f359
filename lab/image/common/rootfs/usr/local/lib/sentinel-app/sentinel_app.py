"""sentinel-app: the lab's own small web service.

Installed by common/provision.sh as /usr/local/bin/sentinel-app with a `#!/usr/bin/python3`
line, so that the process is named after the script (`sentinel-app` in ps, ss and
/proc/PID/comm), as a service of its own would be.

An HTTP server on the address of its configuration (127.0.0.1:8080), behind nginx at
/app/, keeping its data in PostgreSQL and its uploads under its storage directory:

  GET /health   200 when the database answers and the storage directory is writable,
                else 503; the body says which part failed and why
  GET /         counts the visit in the database and answers the count
  --check       reads the configuration, tests the database and the storage, exits 0/1

It logs to stderr (the journal under systemd; the init script sends it to
/var/log/sentinel-app/app.log). Run as the user sentinel-app; never as root.
"""
from __future__ import annotations

import argparse
import configparser
import json
import os
import signal
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_CONFIG = "/etc/sentinel-app/app.conf"


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stderr.write(f"{stamp} sentinel-app[{os.getpid()}]: {message}\n")
    sys.stderr.flush()


class ConfigError(Exception):
    pass


def read_config(path: str) -> dict:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except configparser.Error as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        listen = parser.get("server", "listen")
        dsn = parser.get("database", "dsn")
        storage = parser.get("storage", "dir", fallback="/var/lib/sentinel-app")
    except configparser.Error as exc:
        raise ConfigError(f"{path}: {exc}") from None
    host, _sep, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{path}: [server] listen must be HOST:PORT, got {listen!r}")
    return {"host": host, "port": int(port), "dsn": dsn, "storage": storage}


def check_database(dsn: str) -> str | None:
    """None when the database answers, else why not (one line)."""
    try:
        import psycopg2
    except ImportError as exc:
        return f"no database driver: {exc}"
    try:
        conn = psycopg2.connect(dsn, connect_timeout=3)
    except psycopg2.Error as exc:
        return " ".join(str(exc).split())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM visits")
            cur.fetchone()
        return None
    except psycopg2.Error as exc:
        return " ".join(str(exc).split())
    finally:
        conn.close()


def check_storage(directory: str) -> str | None:
    """None when a new file can be written in the storage directory, else why not.

    A new file each time (then removed): rewriting one kept file could reuse its own
    blocks and pass on a full filesystem.
    """
    try:
        with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".health-probe-", encoding="utf-8") as handle:
            handle.write(f"{time.time()}\n" * 64)
            handle.flush()
            os.fsync(handle.fileno())
        return None
    except OSError as exc:
        return f"cannot write in {directory}: {exc.strerror}"


def count_visit(dsn: str) -> int:
    import psycopg2

    conn = psycopg2.connect(dsn, connect_timeout=3)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("INSERT INTO visits DEFAULT VALUES")
            cur.execute("SELECT count(*) FROM visits")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def make_handler(config: dict) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "sentinel-app/1.0"

        def _answer(self, status: int, body: dict) -> None:
            data = (json.dumps(body) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/health":
                database = check_database(config["dsn"])
                storage = check_storage(config["storage"])
                if database or storage:
                    log(f"health: database: {database or 'ok'}; storage: {storage or 'ok'}")
                    self._answer(503, {"status": "unavailable", "database": database or "ok",
                                       "storage": storage or "ok"})
                else:
                    self._answer(200, {"status": "ok", "database": "ok", "storage": "ok"})
            elif path == "/":
                try:
                    self._answer(200, {"visits": count_visit(config["dsn"])})
                except Exception as exc:  # the database's message is what an operator needs
                    log(f"GET /: {' '.join(str(exc).split())}")
                    self._answer(503, {"status": "unavailable", "error": " ".join(str(exc).split())})
            else:
                self._answer(404, {"error": "not found"})

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return  # access logs are nginx's job

    return Handler


def _stop(_signum: int, _frame: object) -> None:
    log("stopping (SIGTERM)")
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sentinel-app")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--check", action="store_true", help="test the configuration, database and storage")
    args = parser.parse_args(argv)
    try:
        config = read_config(args.config)
    except ConfigError as exc:
        log(f"fatal: {exc}")
        return 1
    if args.check:
        problems = [p for p in (check_database(config["dsn"]), check_storage(config["storage"])) if p]
        for problem in problems:
            print(f"sentinel-app: {problem}")
        print(f"sentinel-app: configuration {args.config} {'has problems' if problems else 'is ok'}")
        return 1 if problems else 0
    if os.geteuid() == 0:
        log("fatal: refusing to run as root; run as the user sentinel-app")
        return 1
    try:
        os.makedirs(os.path.join(config["storage"], "uploads"), exist_ok=True)
    except OSError as exc:
        log(f"warning: cannot create the uploads directory: {exc.strerror}")
    try:
        server = ThreadingHTTPServer((config["host"], config["port"]), make_handler(config))
    except OSError as exc:
        log(f"fatal: cannot listen on {config['host']}:{config['port']}: {exc.strerror}")
        return 1
    signal.signal(signal.SIGTERM, _stop)
    log(f"listening on {config['host']}:{config['port']}, storage {config['storage']}")
    problem = check_database(config["dsn"])
    if problem:
        log(f"database not available yet: {problem}")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
