# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What decides a TLS handshake, read when a service's failure says a handshake failed.

A server that runs and passes its config test can still fail every handshake: its protocols
or suites leave nothing in common with its clients, or none of its suites fits its
certificate's key. The words of such a failure (``handshake failure``, ``no shared cipher``,
``wrong version number``, ``unsupported protocol``) trigger this; then the evidence shows the
TLS directives in effect (each ``file:line``, read from the service's main configuration file
through its includes, in the order the server reads them) and, for each certificate, its public
key (algorithm, size or curve) and signature algorithm. A directive is TLS's by its name
(``ssl_*`` and ``tls-*`` alike: nginx's ssl_ciphers, Redis's tls-protocols, PostgreSQL's
ssl_min_protocol_version, Apache's SSLCipherSuite). A key file is never opened: its path,
owner and mode are all that is said of it. Standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import glob
import os
import re
import stat

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import MARK, redact_text

# A handshake that failed, in the words of OpenSSL, of clients (curl, Python, Go) and servers.
HANDSHAKE_FAILED = re.compile(
    r"handshake[ _]fail|no shared cipher|wrong[ _]version[ _]number|unsupported[ _]protocol"
    r"|no[ _]protocols[ _]available|no[ _]suitable[ _]signature|no[ _]cipher(?:s)?[ _]available"
    r"|(?:sslv3|tlsv1)[ _]alert|tls: (?:no cipher|client offered only unsupported|protocol version not supported)"
    r"|version[ _]too[ _]low|unsupported[ _]version|inappropriate[ _]fallback|SSL_do_handshake\(\) failed",
    re.IGNORECASE)
# A configuration line setting a TLS directive: its name starts with ssl or tls (any case), then
# the value after blanks or '='; a comment line never.
_DIRECTIVE = re.compile(r"""^\s*(?P<name>(?:ssl|tls)[A-Za-z0-9_-]*)(?:\s*=\s*|\s+)(?P<value>[^#;\n]*?)\s*;?\s*(?:#.*)?$""",
                        re.IGNORECASE)
_INCLUDE = re.compile(
    r"""^\s*[!$@]?(?P<word>include(?:_dir|_if_exists|dir|optional|config)?)(?:\s*=\s*|\s+)["']?"""
    r"""(?P<target>[\w./~*?\[-][^"';\s]*)""", re.IGNORECASE)
# A directive that names a certificate file (not its key): ssl_certificate, tls-cert-file,
# ssl_cert_file, SSLCertificateFile, ssl_client_certificate, tls-ca-cert-file.
_CERT_DIRECTIVE = re.compile(r"cert", re.IGNORECASE)
_KEY_DIRECTIVE = re.compile(r"key|passphrase|password", re.IGNORECASE)
MAX_FILES = 40          # configuration files read through includes
MAX_DIRECTIVES = 30     # directives shown
MAX_CERTS = 6
VALUE_CHARS = 200
READ_MAX = 262144


def handshake_failed(texts) -> bool:
    """Whether any of ``texts`` (the failure, the config test, logs) says a TLS handshake failed."""
    return any(HANDSHAKE_FAILED.search(str(text or "")) for text in texts)


def _stems(defn: dict) -> list:
    names = [str(defn.get("name") or "")] + [str(p) for p in defn.get("processes") or []]
    return [re.split(r"[@.\-_]", n.lower(), maxsplit=1)[0] for n in names if n]


def entry_files(defn: dict) -> list:
    """The files the server reads first: those its config test names, else a configuration path
    that is a file, else a file named after the service in a configuration directory
    (``nginx.conf``, ``redis.conf``, ``postgresql.conf``)."""
    named = [os.path.realpath(a) for a in defn.get("config_test") or [] if str(a).startswith("/")
             and os.path.isfile(a) and not os.access(a, os.X_OK)]
    if named:
        return named
    paths = [str(p) for p in defn.get("config_paths") or []]
    files = [os.path.realpath(p) for p in paths if os.path.isfile(p)]
    if files:
        return files
    stems = [s for s in _stems(defn) if len(s) >= 3]
    found = []
    for root in paths:
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if os.path.isfile(full) and name.endswith(".conf") and any(name.lower().startswith(s) for s in stems):
                found.append(os.path.realpath(full))
    return found[:2]


def _read_lines(path: str) -> list:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(READ_MAX)
    except (IOError, OSError):
        return []
    if b"\0" in raw:
        return []
    return raw.decode("utf-8", "replace").splitlines()


def _include_targets(target: str, here: str, roots: list) -> list:
    """The files an include names, resolved against the including file's directory, else a
    configuration directory (nginx resolves from its prefix, PostgreSQL from the file), sorted."""
    bases = [target] if target.startswith("/") else [os.path.normpath(os.path.join(b, target))
                                                     for b in [here] + roots]
    for candidate in bases:
        found = sorted(glob.glob(candidate))
        if found:
            out = []
            for path in found:
                if os.path.isdir(path):
                    out += sorted(os.path.join(path, n) for n in os.listdir(path)
                                  if os.path.isfile(os.path.join(path, n)))
                elif os.path.isfile(path):
                    out.append(path)
            return out
    return []


def directives_in_effect(defn: dict) -> tuple:
    """``(entries, directives)``: the entry files, and ``[(file, line, name, value)]`` of the TLS
    directives met reading them and what they include, in reading order (bounded)."""
    roots = [os.path.realpath(str(p)) for p in defn.get("config_paths") or [] if os.path.isdir(str(p))]
    entries = entry_files(defn)
    seen, found = set(), []

    def read(path: str, depth: int) -> None:
        real = os.path.realpath(path)
        if real in seen or len(seen) >= MAX_FILES or depth > 8:
            return
        seen.add(real)
        for number, line in enumerate(_read_lines(real), 1):
            if len(found) >= MAX_DIRECTIVES:
                return
            stripped = line.strip()
            if not stripped or stripped.startswith(("#", ";", "//")):
                continue
            include = _INCLUDE.match(line)
            if include:
                for target in _include_targets(include.group("target"), os.path.dirname(real), roots):
                    read(target, depth + 1)
                continue
            match = _DIRECTIVE.match(line)
            if match and match.group("value").strip():
                found.append((path, number, match.group("name"), _value(match.group("name"), match.group("value"))))

    for entry in entries:
        read(entry, 0)
    return entries, found


# A directive whose value is a secret itself (a key's passphrase: Redis's tls-key-file-pass),
# unless the value names a file (nginx's ssl_password_file).
_SECRET_VALUE = re.compile(r"pass|secret|token", re.IGNORECASE)


def _value(name: str, value: str) -> str:
    value = value.strip()
    if _SECRET_VALUE.search(name) and not value.strip("'\"").startswith("/"):
        return MARK % "tls-passphrase"
    return redact_text(value)[:VALUE_CHARS]


def _unquoted(value: str) -> str:
    value = value.strip().strip("'\"")
    return value.split()[0] if value.split() else ""


def _resolve(value: str, here: str, roots: list, data_paths: list) -> str:
    if value.startswith("/"):
        return value
    for base in [here] + roots + data_paths:
        candidate = os.path.normpath(os.path.join(base, value))
        if os.path.exists(candidate):
            return candidate
    return ""


def _owner(st) -> str:
    try:
        import pwd  # pylint: disable=import-outside-toplevel
        import grp  # pylint: disable=import-outside-toplevel
        return "%s:%s" % (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name)
    except (KeyError, ImportError):
        return "%d:%d" % (st.st_uid, st.st_gid)


def key_file_text(path: str) -> str:
    """A key file's kind, owner and mode (never its content)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return "cannot be read: %s" % (exc.strerror or exc)
    kind = "file" if stat.S_ISREG(st.st_mode) else "not a regular file"
    return "%s, owner %s, mode %04o (content not read)" % (kind, _owner(st), stat.S_IMODE(st.st_mode))


_KEY_ALGORITHM = re.compile(r"Public Key Algorithm:\s*(\S+)")
_KEY_BITS = re.compile(r"Public-Key:\s*\((\d+) bit\)")
_CURVE = re.compile(r"ASN1 OID:\s*(\S+)")
_SIGNATURE = re.compile(r"Signature Algorithm:\s*(\S+)")
_ALGORITHM_NAMES = {"rsaencryption": "RSA", "id-ecpublickey": "EC", "ed25519": "Ed25519", "ed448": "Ed448",
                    "dsaencryption": "DSA", "rsassa-pss": "RSA-PSS"}


def key_facts(text: str) -> str:
    """``openssl x509 -text`` output as ``key EC prime256v1 (256 bit), signature ecdsa-with-SHA256``."""
    algorithm = _KEY_ALGORITHM.search(text)
    if not algorithm:
        return ""
    name = _ALGORITHM_NAMES.get(algorithm.group(1).lower(), algorithm.group(1))
    parts = [name]
    curve = _CURVE.search(text)
    if curve and name == "EC":
        parts.append(curve.group(1))
    bits = _KEY_BITS.search(text)
    if bits:
        parts.append("(%s bit)" % bits.group(1))
    signature = _SIGNATURE.search(text)
    return "key " + " ".join(parts) + (", signature %s" % signature.group(1) if signature else "")


def certificate_key(path: str, timeout: int) -> str:
    """The public key and signature algorithm of the certificate ``path`` (openssl; a file that
    holds a private key is not given to it), or "" when it cannot tell."""
    openssl = host_probe.find_tool("openssl")
    if not openssl:
        return ""
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
    except (IOError, OSError):
        return ""
    if b"PRIVATE KEY" in head or b"BEGIN CERTIFICATE" not in head:
        return ""
    rc, said, _err = host_probe.run_argv([openssl, "x509", "-noout", "-text", "-in", path], timeout=timeout)
    return key_facts(said) if rc == 0 else ""


def tls_text(defn: dict, timeout: int = 10) -> tuple:
    """``(text, certificates)``: the TLS directives in effect as lines (``FILE:LINE name value``,
    then each key file's path, owner and mode), and the certificate files they name."""
    entries, found = directives_in_effect(defn)
    if not entries:
        return "", []
    roots = [os.path.realpath(str(p)) for p in defn.get("config_paths") or [] if os.path.isdir(str(p))]
    data = [str(p) for p in defn.get("data_paths") or []]
    lines = ["TLS directives in effect (file:line, read from %s through its includes, in reading order):"
             % ", ".join(entries)]
    if not found:
        lines.append("none: the server uses its TLS library's defaults")
    certs, keys = [], []
    for path, number, name, value in found:
        lines.append("%s:%d %s %s" % (path, number, name, value))
        target = _resolve(_unquoted(value), os.path.dirname(os.path.realpath(path)), roots, data)
        if not target:
            continue
        if _KEY_DIRECTIVE.search(name):
            if target not in keys:
                keys.append(target)
        elif _CERT_DIRECTIVE.search(name) and target not in certs and os.path.isfile(target):
            certs.append(target)
    for key in keys[:MAX_CERTS]:
        lines.append("key file %s: %s" % (key, key_file_text(key)))
    return "\n".join(lines), certs[:MAX_CERTS]
