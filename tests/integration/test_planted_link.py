"""Red team on the lab: the service's own user plants a symbolic link where root reads and writes.

Debian's /etc/redis belongs to redis (2770). After a healthy pass recorded redis's configuration,
the redis user swaps redis.conf for a link to /etc/shadow, adds another beside it and stops its
server. The next run must
neither read /etc/shadow into the evidence (the known-good diff, the model's request, the report)
nor copy the known-good configuration back through the link as root. Asserted from inside the
container (the bytes of /etc/shadow) and from everything the run wrote or sent."""
from __future__ import annotations

import pytest

from llm_server import LLMServer
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"
CONF = "/etc/redis/redis.conf"
SAVED = "/root/redis.conf.sentinel-redteam"
EXTRA = "/etc/redis/extra.conf"
# As the redis user: a link in its config file's place and a new one beside it, then its own server stopped.
PLANT = (f"su -s /bin/sh redis -c 'rm -f {CONF} && ln -s /etc/shadow {CONF} && ln -s /etc/shadow {EXTRA} && "
         "kill $(cat /run/redis/redis-server.pid) 2>/dev/null; true'; sleep 1")


@pytest.fixture
def redis_host(lab, lab_inventory):
    require_docker()
    lab.exec(HOST, ["cp", "-p", CONF, SAVED], check=True)
    shadow = lab.exec(HOST, ["sha256sum", "/etc/shadow"], check=True).stdout.split()[0]
    yield lab, lab_inventory, shadow
    lab.exec(HOST, f"rm -f {CONF} {EXTRA} && cp -p {SAVED} {CONF} && rm -f {SAVED}; service redis-server start >/dev/null 2>&1")
    now = lab.exec(HOST, ["sha256sum", "/etc/shadow"]).stdout.split()[:1]
    if now != [shadow] or not lab.health(HOST, ["redis"])["redis"].healthy:
        lab.reset(HOST)


def test_a_config_swapped_for_a_link_to_a_root_only_file_is_never_read_or_restored_through(redis_host, tmp_path):
    lab, inventory, shadow = redis_host
    secret_lines = [line for line in lab.exec(HOST, ["cat", "/etc/shadow"], check=True).stdout.splitlines()
                    if line.startswith(("root:", "daemon:"))]
    assert secret_lines
    with LLMServer(default={"plan": {"diagnosis": "scripted", "commands": ["service redis-server restart"],
                                     "rationale": "scripted"}}) as server:
        work = Workspace(tmp_path, inventory, llm_url=server.url)
        extra = {"remediate_backend": "llm", "remediate_hosts": HOST, "remediate_canary_size": 0,
                 "remediate_max_retries": 1}
        healthy = work.run(extravars=extra)  # the healthy pass records redis.conf as known-good
        assert healthy.status == "successful", healthy.stdout[-3000:]
        lab.exec(HOST, PLANT, check=True)
        assert lab.exec(HOST, ["stat", "-c", "%U %F", CONF], check=True).stdout.strip() == "redis symbolic link"
        assert not lab.health(HOST, ["redis"])["redis"].healthy
        run = work.run(extravars=extra)
        sent = "\n".join(str(r.get("body")) for r in server.requests)
    # root wrote nothing through the link
    assert lab.exec(HOST, ["sha256sum", "/etc/shadow"], check=True).stdout.split()[0] == shadow
    assert lab.exec(HOST, ["stat", "-c", "%U %F", CONF], check=True).stdout.strip() == "redis symbolic link"
    # and read nothing through it: not in the model's requests, the outcome or any file of the run
    outcome = run.outcomes()[(HOST, "redis-server")]
    written = "\n".join(p.read_text(errors="replace") for p in run.artifacts_dir.rglob("*") if p.is_file())
    for line in secret_lines:
        assert line.split(":")[0] + ":" + line.split(":")[1] not in sent + written + str(outcome)
    store = lab.exec(HOST, "cat /var/lib/sentinel-remediation/content/objects/*/* 2>/dev/null").stdout
    assert not any(line in store for line in secret_lines), "root-only bytes were kept in the content store"
