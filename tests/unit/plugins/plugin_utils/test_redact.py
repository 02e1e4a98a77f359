# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction: the positive and negative corpora in tests/corpora/redaction, and the basics."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.module_utils.redact import (
    is_secret_key,
    redact_text,
    redact_value,
)

CORPORA = Path(__file__).resolve().parents[3] / "corpora" / "redaction"
SECRETS = yaml.safe_load((CORPORA / "secrets.yml").read_text(encoding="utf-8"))
HARMLESS = yaml.safe_load((CORPORA / "harmless.yml").read_text(encoding="utf-8"))

CASES = [
    ("password=hunter2 user=bob", "hunter2", "[REDACTED:password]"),
    ('DB_PASSWORD="two words"', "two words", "[REDACTED:password]"),
    ("passwd: letmein", "letmein", "[REDACTED:password]"),
    ("client_secret=abc123xyz", "abc123xyz", "[REDACTED:secret]"),
    ('{"api_key": "k-123456"}', "k-123456", "[REDACTED:api_key]"),
    ("requirepass s3cr3t-redis", "s3cr3t-redis", "[REDACTED:requirepass]"),
    ("masterauth 'other pw'", "other pw", "[REDACTED:requirepass]"),
    ("redis-cli -a clipass ping", "clipass", "[REDACTED:password]"),
    ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop", "[REDACTED:authorization]"),
    ('curl -H "Authorization: Basic dXNlcjpwYXNz" http://x', "dXNlcjpwYXNz", "[REDACTED:authorization]"),
    ("token is Bearer abcdefghijklmnopq", "abcdefghijklmnopq", "[REDACTED:bearer]"),
    ("key sk-proj-abcdefghijklmnopqrstuv", "sk-proj-abcdefghijklmnopqrstuv", "[REDACTED:api_key]"),
    ("AKIAABCDEFGHIJKLMNOP in env", "AKIAABCDEFGHIJKLMNOP", "[REDACTED:api_key]"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123", "[REDACTED:api_key]"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij", "[REDACTED:api_key]"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N", "eyJzdWIiOiIxMjM0In0", "[REDACTED:jwt]"),
    ("postgres://app:pw-123@db:5432/app", "pw-123", "postgres://[REDACTED:url_credentials]@db:5432/app"),
    ("amqp://guest:guest@rabbit/", "guest:guest", "[REDACTED:url_credentials]"),
    ("root:$6$saltsalt$abcdefghijklmnopqrstuv:19000", "$6$saltsalt$abcdef", "[REDACTED:password_hash]"),
    ("--password hunter3 --user x", "hunter3", "[REDACTED:password]"),
]


@pytest.mark.parametrize("text, secret, marker", CASES)
def test_secrets_are_replaced(text, secret, marker):
    redacted = redact_text(text)
    assert secret not in redacted
    assert marker in redacted


def test_private_key_block_whole_and_cut():
    block = "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter"
    assert redact_text(block) == "before\n[REDACTED:private_key]\nafter"
    cut = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA"
    assert redact_text(cut) == "[REDACTED:private_key]"


@pytest.mark.parametrize("text", [
    "proxy_pass http://backend;",
    "Failed password for root from 10.0.0.1 port 22 ssh2",
    'nginx: [emerg] unknown directive "lisen" in /etc/nginx/conf.d/a.conf:3',
    "Permission denied (publickey,password).",
    "max_tokens=300 prompt_tokens: 12",
    "bind() to 0.0.0.0:80 failed (98: Address already in use)",
])
def test_ordinary_text_is_kept(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("text, _secret, _marker", CASES)
def test_idempotent(text, _secret, _marker):
    once = redact_text(text)
    assert redact_text(once) == once


def test_redact_value_walks_structures():
    value = {"password": "x1", "nested": [{"log": "token=abc123def"}, ("requirepass zz",)], "port": 80,
             "ok": True, "none": None, "api_key": ""}
    result = redact_value(value)
    assert result["password"] == "[REDACTED:password]"
    assert result["nested"][0]["log"] == "token=[REDACTED:token]"
    assert result["nested"][1] == ("requirepass [REDACTED:requirepass]",)
    assert result["port"] == 80 and result["ok"] is True and result["none"] is None and result["api_key"] == ""


def test_non_strings():
    assert redact_text(None) == ""
    assert redact_text(b"password=abc") == "password=[REDACTED:password]"
    assert redact_text(42) == "42"


@pytest.mark.parametrize("case", SECRETS, ids=[c["text"][:50] for c in SECRETS])
def test_secret_formats_are_redacted(case: dict) -> None:
    redacted = redact_text(case["text"])
    assert case["secret"] not in redacted, redacted
    assert case["marker"] in redacted, redacted
    assert redact_text(redacted) == redacted  # idempotent


@pytest.mark.parametrize("text", HARMLESS, ids=[t[:50] for t in HARMLESS])
def test_harmless_lines_are_not_damaged(text: str) -> None:
    assert redact_text(text) == text


def test_corpora_sizes() -> None:
    assert len(SECRETS) >= 40 and len(HARMLESS) >= 30


@pytest.mark.parametrize(("key", "secret"), [
    ("password", True), ("DB_PASSWORD", True), ("client-key-data", True), ("AccountKey", True), ("auth", True),
    ("token_ttl", False), ("password_file", False), ("max_tokens", False), ("author", False),
    ("PasswordAuthentication", False), ("signal", False),
])
def test_secret_key_names(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_redact_value_keeps_harmless_values_under_secret_keys() -> None:
    value = {"token_ttl": 3600, "password_file": "/run/secrets/x", "password": "yes", "token": "Zx81kPq3Lm0vRt7Yb",
             "nested": {"auth": "ZGVwbG95OnMzY3JldA=="}}
    result = redact_value(value)
    assert result["token_ttl"] == 3600
    assert result["password_file"] == "/run/secrets/x"
    assert result["password"] == "yes"
    assert result["token"] == "[REDACTED:token]"
    assert result["nested"]["auth"] == "[REDACTED:password]"
