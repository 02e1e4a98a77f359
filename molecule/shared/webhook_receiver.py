# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A loopback stand-in for Alertmanager's webhook receiver, for molecule scenarios.

Listens on 127.0.0.1 (a free port), appends every POSTed JSON body as one line to
DIR/bodies.jsonl, and writes its URL to DIR/url once it listens and its PID to DIR/pid
(so cleanup can stop exactly this process).

    python webhook_receiver.py DIR
"""
from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def serve(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    bodies = directory / "bodies.jsonl"
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
                status = 200
            except ValueError:
                body, status = {"unparsable": raw.decode("utf-8", "replace")}, 400
            with lock, bodies.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"path": self.path, "body": body}, sort_keys=True) + "\n")
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    (directory / "pid").write_text(f"{os.getpid()}\n", encoding="utf-8")
    url = f"http://127.0.0.1:{server.server_address[1]}/alerts"
    # Written last and atomically: a reader that sees the URL can POST to it.
    (directory / "url.tmp").write_text(url + "\n", encoding="utf-8")
    (directory / "url.tmp").rename(directory / "url")
    server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: webhook_receiver.py DIR", file=sys.stderr)
        return 2
    serve(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
