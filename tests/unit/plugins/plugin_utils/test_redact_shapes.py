# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction by the shape of a secret (one test per rule), beside its harmless neighbours."""
from __future__ import annotations

import base64

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

# DER of a private key starts with a version number; a certificate or a public key does not.
_RSA_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
_PKCS8_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7vbqajDw4o6gJ"
_OPENSSH_BODY = base64.b64encode(b"openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none").decode()
_CERT_BODY = "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ"


@pytest.mark.parametrize("body", [_RSA_BODY, _PKCS8_BODY, _OPENSSH_BODY])
def test_key_body_without_its_begin_line(body: str) -> None:
    text = f"May  1 12:00:01 web01 app[12]: {body}\nMay  1 12:00:01 web01 app[12]: {_CERT_BODY}\nnext line"
    out = redact_text(text)
    assert body not in out and _CERT_BODY not in out  # the lines after the key's start are its body
    assert out.endswith("next line")


def test_certificate_body_is_kept() -> None:
    assert redact_text(f"cert: {_CERT_BODY}") == f"cert: {_CERT_BODY}"


def test_key_in_json_with_escaped_newlines() -> None:
    text = '{"private_key": "-----BEGIN PRIVATE KEY-----\\n' + _PKCS8_BODY + '\\n-----END PRIVATE KEY-----\\n"}'
    assert _PKCS8_BODY not in redact_text(text)


@pytest.mark.parametrize(("text", "secret"), [
    ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    ("ya29.a0AfH6SMBx3kZ5Q9vWmT2LpRr8YcN1oJdEe4uGhI7fKsVbXw", "a0AfH6SMBx3kZ5Q9vWmT2LpRr8YcN1oJdEe4uGhI7fKsVbXw"),
    ("<password>xmlPw2</password>", "xmlPw2"),
    ('<add key="ApiKey" value="cfgApiKey9876" />', "cfgApiKey9876"),
    ("  - name: DB_PASS\n    value: k8sValuePw", "k8sValuePw"),
    ('{"name": "API_TOKEN", "value": "tok-abc-123456"}', "tok-abc-123456"),
    ("auth_pass vrrpPw11", "vrrpPw11"),
    ('1714560000.1 [0 127.0.0.1:5] "AUTH" "default" "p4ssw0rdX"', "p4ssw0rdX"),
    ("AUTH p4ssw0rdX", "p4ssw0rdX"),
    ("https://discord.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
     "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
])
def test_secret_shapes(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out and "[REDACTED:" in out
    assert redact_text(out) == out


@pytest.mark.parametrize("text", [
    "proxy_pass http://backend;", "requirepass is not set", "nginx-1.22.1-9+deb12u1",
    "sha256:4e1243bd22c66e76c2ba9eddc1f91394e57f9f83c5e3a4b2d1c0f9e8d7c6b5a4",
    "request_id=550e8400-e29b-41d4-a716-446655440000", "<name>nginx</name>", "- name: LOG_LEVEL\n  value: debug",
    "password_file /run/secrets/db", "https://example.com/hooks/deploy", "AUTH required",
    "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s root@web01 (ED25519)",
])
def test_harmless_neighbours(text: str) -> None:
    assert redact_text(text) == text
