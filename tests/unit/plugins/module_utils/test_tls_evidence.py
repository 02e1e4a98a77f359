# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A failed TLS handshake brings the TLS directives in effect (file:line, through includes) and
each certificate's key and signature algorithm; a key file's content is never read."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence, tls_evidence

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(not OPENSSL, reason="openssl is not on this machine")


def _cert(directory, name, *key):
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", *key, "-nodes", "-keyout", str(directory / f"{name}.key"),
                    "-out", str(directory / f"{name}.crt"), "-subj", f"/CN={name}.test", "-days", "30"],
                   check=True, capture_output=True)
    os.chmod(directory / f"{name}.key", 0o600)
    return str(directory / f"{name}.crt"), str(directory / f"{name}.key")


def _web(tmp_path):
    conf = tmp_path / "etc" / "web"
    for sub in ("sites-available", "sites-enabled", "snippets", "tls"):
        (conf / sub).mkdir(parents=True)
    (conf / "web.conf").write_text("user www;\nhttp {\n\tssl_protocols TLSv1.2 TLSv1.3; # server-wide\n"
                                   "\tinclude sites-enabled/*;\n}\n")
    (conf / "sites-available" / "default").write_text(
        "server {\n\tlisten 443 ssl;\n\tssl_certificate tls/site.crt;\n\tssl_certificate_key tls/site.key;\n"
        "\tinclude snippets/profile.conf;\n}\n")
    (conf / "sites-enabled" / "default").symlink_to(conf / "sites-available" / "default")
    (conf / "snippets" / "profile.conf").write_text("# the profile\nssl_protocols TLSv1.2;\n"
                                                    "ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256;\n")
    # a snippet nothing includes: its directives are not in effect
    (conf / "snippets" / "unused.conf").write_text("ssl_certificate /etc/ssl/other.pem;\n")
    defn = {"name": "web", "processes": ["web"], "config_paths": [str(conf)], "config_test": ["web", "-t"],
            "data_paths": []}
    return defn, conf


def test_the_failures_words_trigger_it_and_others_do_not():
    for said in ("[SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] sslv3 alert handshake failure (_ssl.c:992)",
                 "SSL_do_handshake() failed (SSL: error:0A0000C1:SSL routines::no shared cipher)",
                 "[SSL: WRONG_VERSION_NUMBER] wrong version number", "tlsv1 alert protocol version",
                 "remote error: tls: handshake failure", "SSL routines::unsupported protocol"):
        assert tls_evidence.handshake_failed([said]), said
    for said in ("GET http://127.0.0.1/ returned 502", "certificate has expired", "", None):
        assert not tls_evidence.handshake_failed([said]), said


def test_the_directives_in_effect_follow_the_includes_in_reading_order_with_file_and_line(tmp_path):
    defn, conf = _web(tmp_path)
    entries, found = tls_evidence.directives_in_effect(defn)
    assert entries == [str(conf / "web.conf")]
    site = str(conf / "sites-enabled" / "default")
    assert found == [(str(conf / "web.conf"), 3, "ssl_protocols", "TLSv1.2 TLSv1.3"),
                     (site, 3, "ssl_certificate", "tls/site.crt"),
                     (site, 4, "ssl_certificate_key", "tls/site.key"),
                     (str(conf / "snippets" / "profile.conf"), 2, "ssl_protocols", "TLSv1.2"),
                     (str(conf / "snippets" / "profile.conf"), 3, "ssl_ciphers", "ECDHE-RSA-AES128-GCM-SHA256")]


def test_other_grammars_are_read_by_the_same_rule(tmp_path):
    conf = tmp_path / "redis"
    conf.mkdir()
    (conf / "redis.conf").write_text("port 0\ntls-port 6380\ntls-protocols \"TLSv1.3\"\n# tls-ciphers X\n"
                                     "tls-key-file-pass hunter2hunter2\n")
    _entries, found = tls_evidence.directives_in_effect({"name": "redis-server", "processes": ["redis-server"],
                                                         "config_paths": [str(conf)], "config_test": []})
    assert [(n, v) for _f, _l, n, v in found] == [("tls-port", "6380"), ("tls-protocols", '"TLSv1.3"'),
                                                  ("tls-key-file-pass", "[REDACTED:tls-passphrase]")]
    pg = tmp_path / "pg"
    pg.mkdir()
    (pg / "postgresql.conf").write_text("ssl = on\nssl_min_protocol_version = 'TLSv1.3'\t# lowest\n")
    _entries, found = tls_evidence.directives_in_effect({"name": "postgresql", "processes": ["postgres"],
                                                         "config_paths": [str(pg)], "config_test": []})
    assert [(n, v) for _f, _l, n, v in found] == [("ssl", "on"), ("ssl_min_protocol_version", "'TLSv1.3'")]


@needs_openssl
def test_each_certificate_shows_its_key_and_signature_and_a_key_file_only_its_owner_and_mode(tmp_path, monkeypatch):
    defn, conf = _web(tmp_path)
    cert, key = _cert(conf / "tls", "site", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")
    rsa, _rsa_key = _cert(conf / "tls", "other", "rsa:2048")
    ed, _ed_key = _cert(conf / "tls", "ed", "ed25519")
    text, certs = tls_evidence.tls_text(defn)
    assert certs == [cert]
    assert f"key file {key}: file, owner " in text and "mode 0600 (content not read)" in text
    assert str(conf / "snippets" / "unused.conf") not in text
    assert tls_evidence.certificate_key(cert, 10) == "key EC prime256v1 (256 bit), signature ecdsa-with-SHA256"
    assert tls_evidence.certificate_key(rsa, 10) == "key RSA (2048 bit), signature sha256WithRSAEncryption"
    assert tls_evidence.certificate_key(ed, 10) == "key Ed25519, signature ED25519"
    # a key file is never opened
    opened = []
    real_open = open

    def watching(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watching)
    tls_evidence.tls_text(defn)
    service_evidence.certificates(defn, 10, named=certs, keys=True)
    assert key not in opened and not [p for p in opened if p.endswith(".key")]


@needs_openssl
def test_the_evidence_has_the_tls_section_only_when_a_handshake_failed(tmp_path):
    defn, conf = _web(tmp_path)
    _cert(conf / "tls", "site", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")
    full = dict(defn, units=[], logs=[], log_paths=[], data_paths=[], runtime_paths=[], pid_files=[], ports=[],
                paths=[], depends_on=[], user=None, checks=[], config_test=[])
    plain = service_evidence.collect(full, error="GET http://127.0.0.1/ returned 502", timeout=5)["evidence"]
    assert "tls" not in plain and "key EC" not in str(plain.get("certificates"))
    failed = service_evidence.collect(full, error="[SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] sslv3 alert handshake "
                                                  "failure", timeout=5)["evidence"]
    assert "ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256" in failed["tls"]
    assert "key EC prime256v1 (256 bit), signature ecdsa-with-SHA256" in failed["certificates"][
        str(conf / "tls" / "site.crt")]
