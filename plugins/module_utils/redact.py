# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secret redaction shared by the controller (planner) and the hosts (evidence module).

Runs on targets, so: standard library only and Python 3.8 compatible syntax.
Every secret is replaced by ``[REDACTED:<kind>]`` so a reader (or an LLM) still sees
that something was there and what it was.  The rules are ordered: multi-line blocks
first, then structured forms (URLs, headers), then free-standing tokens, then
``key=value`` pairs, so a more specific rule names the kind.
"""
from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

MARK = "[REDACTED:%s]"

# Names whose value is a secret, inside a longer key too (MYSQL_PASSWORD, client_secret).
_SECRET_KEY = (
    r"[A-Za-z0-9_.-]*?"
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|auth[_-]?key|private[_-]?key|credentials?|_pass)"
    r"[A-Za-z0-9_.-]*"
)
_SECRET_KEY_RE = re.compile(r"^" + _SECRET_KEY + r"$", re.IGNORECASE)
# Keys that match the pattern above but never hold a secret.
_NOT_SECRET_KEYS = frozenset(("token_count", "tokens", "prompt_tokens", "completion_tokens",
                              "max_tokens", "total_tokens"))

_RULES = (
    # PEM private keys (RSA, EC, OPENSSH, ENCRYPTED...), also when cut off before END.
    ("private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)", re.DOTALL),
     lambda m, kind: MARK % kind),
    # scheme://user:password@host -> scheme://[REDACTED]@host
    ("url_credentials", re.compile(
        r"\b([A-Za-z][A-Za-z0-9+.-]{1,20}://)[^\s:/@'\"]+:[^\s@/'\"]*@"),
     lambda m, kind: m.group(1) + MARK % kind + "@"),
    # Authorization / Proxy-Authorization headers, whatever the scheme.
    ("authorization", re.compile(
        r"\b((?:proxy-)?authorization\s*[:=]\s*)(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;\"'][^\n\r,;\"']*)",
        re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    ("bearer", re.compile(r"\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
     lambda m, kind: MARK % kind),
    ("api_key", re.compile(
        r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
        r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
        r"|glpat-[A-Za-z0-9_-]{20,}"
        r"|xox[abposr]-[A-Za-z0-9-]{10,}"
        r"|AIza[0-9A-Za-z_-]{35})"),
     lambda m, kind: MARK % kind),
    # crypt(3) hashes from shadow/htpasswd files.
    ("password_hash", re.compile(r"\$(?:1|2[aby]?|5|6|y|apr1)\$[./A-Za-z0-9$]{8,}"),
     lambda m, kind: MARK % kind),
    # Redis: requirepass / masterauth in config files, CLI flags and CONFIG SET.
    ("requirepass", re.compile(
        r"\b((?:--)?(?:requirepass|masterauth)\s+)(?:\"[^\"\n]*\"|'[^'\n]*'|\S+)",
        re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    ("password", re.compile(r"(\bredis-cli\b[^\n]*?\s-a\s+)(\S+)"),
     lambda m, kind: m.group(1) + MARK % kind),
    # --password value / --token value
    ("password", re.compile(
        r"(--(?:password|passwd|pass|token|api-key|secret)\s+)(?!-)(\S+)", re.IGNORECASE),
     lambda m, kind: m.group(1) + MARK % kind),
    # key=value, key: value, "key": "value" (JSON), KEY="value" (env files).
    ("password", re.compile(
        r"(?P<key>[\"']?\b" + _SECRET_KEY + r"[\"']?\s*[:=]\s*)"
        r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\]]+)",
        re.IGNORECASE),
     None),
)


def _kv_replace(match):
    key = match.group("key")
    name = key.strip("\"' \t:=").lower()
    if name in _NOT_SECRET_KEYS:
        return match.group(0)
    value = match.group("value")
    if value.strip("\"'").startswith("[REDACTED:"):
        return match.group(0)
    if not value.strip("\"'"):
        return match.group(0)
    kind = _kind_for_key(name)
    quote = value[0] if value[0] in "\"'" else ""
    return key + quote + MARK % kind + quote


def _kind_for_key(name):
    name = name.lower()
    if "token" in name:
        return "token"
    if "secret" in name:
        return "secret"
    if "key" in name:
        return "api_key"
    if "credential" in name:
        return "credentials"
    return "password"


def redact_text(text):
    """Return ``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``.

    Idempotent: redacting twice gives the same text.  Non-string input is converted
    with ``str()`` (``None`` becomes an empty string).
    """
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    elif not isinstance(text, str):
        text = str(text)
    for kind, pattern, replace in _RULES:
        if replace is None:
            text = pattern.sub(_kv_replace, text)
        else:
            text = pattern.sub(lambda m, _k=kind, _r=replace: _r(m, _k), text)
    return text


def is_secret_key(name):
    """True when a mapping key names a secret (``password``, ``DB_TOKEN``, ``api_key``...)."""
    if not isinstance(name, str):
        return False
    lowered = name.lower()
    if lowered in _NOT_SECRET_KEYS:
        return False
    return bool(_SECRET_KEY_RE.match(lowered))


def redact_value(value):
    """Redact recursively: strings are redacted, mappings and sequences walked.

    A mapping value under a secret-named key (``password``, ``api_key``...) that is a
    non-empty scalar is replaced whole.  Other types (numbers, booleans, None) are
    returned unchanged.  Tuples stay tuples; sets become lists.
    """
    if isinstance(value, (str, bytes)):
        return redact_text(value)
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if is_secret_key(key) and isinstance(item, (str, bytes, int, float)) \
                    and not isinstance(item, bool) and item != "":
                result[key] = MARK % _kind_for_key(key)
            else:
                result[key] = redact_value(item)
        return result
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_value(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return [redact_value(item) for item in sorted(value, key=str)]
    return value
