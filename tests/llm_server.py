# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small OpenAI-compatible chat server for tests and benchmarks (standard library only).

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` well enough for the real
``openai`` client, on 127.0.0.1 only, and answers from, in order:

1. a queue of scripted replies (``server.queue(...)``, or ``replies`` in a script file);
2. rules: the first whose ``match`` regex finds the request's messages text
   (``rules``: ``[{"match": "nginx.*Address already in use", "reply": {...}}]``);
3. ``default`` (a reply), else HTTP 500 "no scripted reply".

A reply is a dict: ``content`` (str or None), ``plan`` (a dict turned into JSON content),
``refusal``, ``finish_reason`` (``stop``), ``status`` (200), ``headers``, ``body`` (a raw
body to send instead), ``delay`` (seconds before answering), ``usage`` (false: send none),
``reject_formats`` (response_format types answered with HTTP 400 for this request only).
A server-wide ``reject_formats`` list makes the server refuse those types every time, like
servers without structured outputs.

Every request is recorded (``server.requests``: method, path, headers, body) and
``GET /_requests`` returns them as JSON; ``POST /_queue`` appends replies and
``POST /_reset`` clears queue and records, for use from another process.

    python tests/llm_server.py --port 0 --script replies.yml   # prints the base URL
    python tests/llm_server.py --script replies.yml --url-file url --pid-file pid   # for background use
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "sentinel-test-model"


def plan_content(diagnosis: str, commands: list, rationale: str = "because") -> str:
    """JSON content of a plan answer."""
    return json.dumps({"diagnosis": diagnosis, "commands": list(commands), "rationale": rationale})


def _estimate(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "SentinelTestLLM/1.0"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, payload, headers: dict | None = None) -> None:
        body = payload if isinstance(payload, bytes) else (
            payload.encode("utf-8") if isinstance(payload, str) else json.dumps(payload).encode("utf-8"))
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _record(self, body) -> None:
        owner = self.server.owner
        with owner.lock:
            owner.requests.append({"method": self.command, "path": self.path,
                                   "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})

    def do_GET(self):
        owner = self.server.owner
        if self.path.rstrip("/") == "/_requests":
            with owner.lock:
                return self._send(200, {"count": len(owner.requests), "requests": list(owner.requests)})
        self._record(None)
        if self.path.rstrip("/").endswith("/models"):
            return self._send(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": "sentinel-tests"}]})
        return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self):
        owner = self.server.owner
        body = self._read_body()
        path = self.path.rstrip("/")
        if path == "/_queue":
            owner.queue(*(body if isinstance(body, list) else [body]))
            return self._send(200, {"queued": len(owner.pending)})
        if path == "/_reset":
            owner.reset()
            return self._send(200, {"reset": True})
        self._record(body)
        if not path.endswith("/chat/completions"):
            return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._send(400, {"error": {"message": "messages missing", "type": "invalid_request_error"}})
        fmt = (body.get("response_format") or {}).get("type") if isinstance(body.get("response_format"), dict) else None
        if fmt and fmt in owner.reject_formats:
            return self._send(400, {"error": {"message": f"response_format {fmt} is not supported",
                                              "type": "invalid_request_error", "param": "response_format"}})
        reply = owner.next_reply(body)
        if fmt and fmt in (reply.get("reject_formats") or ()):
            owner.pending.appendleft({k: v for k, v in reply.items() if k != "reject_formats"})
            return self._send(400, {"error": {"message": f"response_format {fmt} is not supported",
                                              "type": "invalid_request_error", "param": "response_format"}})
        delay = float(reply.get("delay", owner.latency) or 0)
        if delay:
            time.sleep(delay)
        status = int(reply.get("status", 200))
        if "body" in reply:
            return self._send(status, reply["body"], reply.get("headers"))
        if status != 200:
            message = reply.get("error", f"scripted HTTP {status}")
            return self._send(status, {"error": {"message": message, "type": "scripted"}}, reply.get("headers"))
        content = reply.get("content")
        if "plan" in reply:
            content = json.dumps(reply["plan"])
        prompt_text = "".join(str(m.get("content") or "") for m in body["messages"] if isinstance(m, dict))
        payload = {
            "id": f"chatcmpl-test-{len(owner.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or owner.model,
            "choices": [{"index": 0, "finish_reason": reply.get("finish_reason", "stop"),
                         "message": {"role": "assistant", "content": content, "refusal": reply.get("refusal")}}],
        }
        if reply.get("usage", True) is not False:
            prompt_tokens = _estimate(prompt_text)
            completion_tokens = _estimate(content or "")
            payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens}
        return self._send(200, payload, reply.get("headers"))


class LLMServer:
    """The test server; use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, port: int = 0, replies=(), rules=(), default=None, reject_formats=(), latency: float = 0.0,
                 model: str = MODEL):
        self.lock = threading.Lock()
        self.pending: deque = deque()
        self.requests: list = []
        self.rules = [dict(rule) for rule in rules]
        self.default = default
        self.reject_formats = set(reject_formats)
        self.latency = latency
        self.model = model
        self._port = port
        self._httpd = None
        self._thread = None
        self.queue(*replies)

    # -- scripting -------------------------------------------------------------------
    def queue(self, *replies) -> "LLMServer":
        with self.lock:
            for reply in replies:
                self.pending.append(dict(reply) if isinstance(reply, dict) else {"content": str(reply)})
        return self

    def reset(self) -> None:
        with self.lock:
            self.pending.clear()
            self.requests.clear()

    def next_reply(self, body: dict) -> dict:
        with self.lock:
            if self.pending:
                return self.pending.popleft()
        text = "\n".join(str(m.get("content") or "") for m in body["messages"] if isinstance(m, dict))
        for rule in self.rules:
            if re.search(rule["match"], text, re.IGNORECASE | re.DOTALL):
                return dict(rule["reply"])
        if self.default is not None:
            return dict(self.default)
        return {"status": 500, "error": "no scripted reply left"}

    # -- inspection ------------------------------------------------------------------
    @property
    def chat_requests(self) -> list:
        """Bodies of the chat completion requests, in order."""
        return [r["body"] for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def prompt_text(self, index: int = -1) -> str:
        """All message texts of one chat request, joined."""
        return "\n".join(str(m.get("content") or "") for m in self.chat_requests[index]["messages"])

    # -- life cycle ------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def port(self) -> int:
        return self._httpd.server_address[1] if self._httpd else self._port

    def start(self) -> "LLMServer":
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="llm-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def load_script(path: str) -> dict:
    """A script file (YAML or JSON): replies, rules, default, reject_formats, latency, model."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        import yaml

        data = yaml.safe_load(text)
    except ImportError:
        data = json.loads(text)
    return data or {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="YAML/JSON file: replies, rules, default, reject_formats, latency")
    parser.add_argument("--url-file", help="also write the base URL to this file once the server listens")
    parser.add_argument("--pid-file", help="write this process's PID to this file (to stop it later)")
    args = parser.parse_args(argv)
    script = load_script(args.script) if args.script else {}
    server = LLMServer(port=args.port, replies=script.get("replies") or (), rules=script.get("rules") or (),
                       default=script.get("default"), reject_formats=script.get("reject_formats") or (),
                       latency=float(script.get("latency") or 0), model=script.get("model") or MODEL)
    server.start()
    if args.pid_file:
        with open(args.pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    if args.url_file:  # written whole, then renamed: a reader never sees half a URL
        with open(args.url_file + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(server.url + "\n")
        os.replace(args.url_file + ".tmp", args.url_file)
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
