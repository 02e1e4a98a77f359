"""A TLS server whose every handshake fails while it runs and its config test passes: the
request shows the TLS directives in effect (file:line, through the includes) and each
certificate's key and signature algorithm. On a real lab host (the lab fault
nginx_tls_profile_without_ecdsa_suites: an included profile whose suites need an RSA key, on a
host whose certificate has an EC key).

Each fact is checked against the container itself (nginx's own dump of its configuration,
openssl's reading of the certificate, stat of the key), apart from the code under test; the key
file's content is never in what the host sends."""
from __future__ import annotations

import json
import re

import pytest

from host_module import run_host_module
from llm_server import LLMServer
from test_degraded_cause import asked
from test_do_no_harm import HOST, definition
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FAILURE = "GET https://127.0.0.1/ failed: [SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] sslv3 alert handshake failure"
_KEYS = ("units", "processes", "user", "ports", "runtime_paths", "logs", "log_paths", "config_paths", "data_paths",
         "config_test", "paths", "pid_files")


@pytest.fixture
def tls_profile(lab):
    lab.wait_health(HOST, ["nginx"], timeout=60)
    lab.inject(HOST, "nginx_tls_profile_without_ecdsa_suites")
    yield
    lab.reset(HOST)
    lab.wait_health(HOST, ["nginx"], timeout=90)


def _in_container(lab, command: str) -> str:
    return lab.exec(HOST, ["sh", "-c", command], check=True).stdout


def test_the_tls_directives_in_effect_and_the_certificates_key_reach_the_request(lab, tmp_path, tls_profile):
    require_docker()
    nginx = definition("nginx")
    result = run_host_module(lab.container(HOST), "evidence", {
        **{k: v for k, v in nginx.items() if k in _KEYS}, "service": "nginx", "error": FAILURE})
    evidence = result["evidence"]
    tls = evidence["tls"]
    # every TLS directive nginx itself reads (its own dump, includes followed) is there with its value
    dumped = _in_container(lab, "nginx -T 2>/dev/null")
    said = {(m.group(1), " ".join(m.group(2).split()))
            for m in re.finditer(r"^\s*(ssl_\w+)\s+([^;#]+);", dumped, re.MULTILINE)}
    shown = {(m.group(1), m.group(2)) for m in re.finditer(r"^\S+:\d+ (ssl_\w+) (.*)$", tls, re.MULTILINE)}
    assert said <= shown, (said - shown, tls)
    # each with the file and line where it is
    for match in re.finditer(r"^(\S+):(\d+) (ssl_\w+) ", tls, re.MULTILINE):
        line = _in_container(lab, f"sed -n '{match.group(2)}p' {match.group(1)}")
        assert line.split()[0] == match.group(3), (match.group(0), line)
    assert "/etc/nginx/snippets/tls-pci.conf:3 ssl_ciphers ECDHE-RSA-AES256-GCM-SHA384" in tls
    # the certificate's key as openssl reads it in the container
    text = _in_container(lab, "openssl x509 -in /etc/nginx/tls/lab.crt -noout -text")
    bits = re.search(r"Public-Key: \((\d+) bit\)", text).group(1)
    curve = re.search(r"ASN1 OID: (\S+)", text)
    algorithm = re.search(r"Public Key Algorithm: (\S+)", text).group(1)
    cert = evidence["certificates"]["/etc/nginx/tls/lab.crt"]
    assert f"({bits} bit)" in cert
    assert ("key EC " + curve.group(1)) in cert if algorithm == "id-ecPublicKey" else "key RSA" in cert
    assert "signature " + re.search(r"Signature Algorithm: (\S+)", text).group(1) in cert
    # the key file: its mode, never its content
    mode = _in_container(lab, "stat -c %a /etc/nginx/tls/lab.key").strip()
    assert f"key file /etc/nginx/tls/lab.key: file, owner root:root, mode {int(mode, 8):04o}" in tls
    body = "".join(line for line in _in_container(lab, "cat /etc/nginx/tls/lab.key").splitlines()
                   if "-----" not in line)
    sent = json.dumps(result)
    assert body[10:50] not in sent

    # the engine puts it in the model's request, from the health check's failure alone
    escalate = {"plan": {"diagnosis": "looking", "commands": ["service nginx status"], "rationale": "read",
                         "escalate": True}}
    with LLMServer(rules=[{"match": r"Service: nginx\b", "reply": escalate}]) as server:
        work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        run = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "llm", "remediate_services": [nginx]})
        requests = asked(server)
    assert requests, run.stdout[-3000:]
    request = requests[0]
    assert "### tls" in request, request[:4000]
    assert "/etc/nginx/snippets/tls-pci.conf:3 ssl_ciphers" in request
    assert f"({bits} bit), signature" in request
