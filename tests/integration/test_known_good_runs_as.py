"""What a service runs as and runs, put back from its known-good baseline, on the lab. A healthy
pass records the service account's groups and the mode of its unit's programs; a drift injected
after it for real (the account loses its group; an ExecStartPre program loses its exec bit) is
healed with no LLM configured and no approval, and a membership the account never held still
waits for a human (or is refused when privileged). Asserted from inside the containers: `id`,
`stat`, the lab's own health check."""
from __future__ import annotations

import json

import pytest

from lab_scene import service_scene
from llm_server import LLMServer
from sentinel_lab import kind_group_vars
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PG_HOST = "lab01"  # a SysV host of the session lab
SD_HOST = "lab02"  # the systemd host of the session's mixed lab (conftest mixed_lab)
KEY = "/etc/ssl/private/ssl-cert-snakeoil.key"
HOOK = "/usr/local/sbin/render-upstreams"
DROP_IN = "/etc/systemd/system/nginx.service.d/20-render-upstreams.conf"
RENDERED = "/etc/nginx/conf.d/sd-upstreams.conf"
# The service-discovery hook of nginx (lab/faults.yml nginx_prestart_hook_not_executable), here
# installed executable, so nginx runs healthy with it before the drift.
HOOK_SETUP = (
    f"printf '%s\\n' '#!/bin/sh' 'set -eu' \"printf 'upstream sd_sentinel_app {{\\n    server 127.0.0.1:8080;\\n}}\\n' "
    f"> {RENDERED}.new\" 'mv {RENDERED}.new {RENDERED}' > {HOOK} && chmod 0755 {HOOK} && "
    f"mkdir -p {DROP_IN.rsplit('/', 1)[0]} && printf '%s\\n' '[Service]' 'ExecStartPre={HOOK}' > {DROP_IN} && "
    "systemctl daemon-reload && systemctl restart nginx")
HOOK_DRIFT = (f"chmod 0644 {HOOK} && systemctl restart nginx 2>/dev/null; "
              "for i in $(seq 100); do systemctl -q is-failed nginx && exit 0; sleep 0.1; done; exit 1")
HOOK_TEARDOWN = (f"rm -f {DROP_IN} {HOOK} {RENDERED}; rmdir {DROP_IN.rsplit('/', 1)[0]} 2>/dev/null; "
                 "systemctl daemon-reload; systemctl reset-failed nginx; systemctl restart nginx")


def plan(*commands: str) -> dict:
    return {"plan": {"diagnosis": "scripted", "commands": list(commands), "rationale": "scripted"}}


def groups(lab, host: str, user: str = "postgres") -> list[str]:
    return lab.exec(host, ["id", "-nG", user], check=True).stdout.split()


def only(kind: str, service: str) -> list[dict]:
    """The lab's full definition of one service of a host kind (a run watches that one only)."""
    return [d for d in kind_group_vars(kind)["remediate_services"] if d["name"] == service]


def _run(work: Workspace, host: str, **extra):
    service = "postgresql" if host == PG_HOST else "nginx"
    return work.run(extravars={"remediate_hosts": host, "remediate_canary_size": 0,
                               "remediate_services": only("sysv" if host == PG_HOST else "systemd", service), **extra})


def _known_good_commands(outcome: dict) -> list[dict]:
    return [c for c in outcome["commands"] if c.get("source") == "known_good"]


@pytest.fixture
def postgres_host(lab, lab_inventory):
    require_docker()
    lab.wait_health(PG_HOST, ["postgres"], timeout=90)
    assert "ssl-cert" in groups(lab, PG_HOST)
    yield lab, lab_inventory
    lab.exec(PG_HOST, "gpasswd -d postgres sentinel-kg-never >/dev/null 2>&1; groupdel sentinel-kg-never; "
                      f"chgrp ssl-cert {KEY}; gpasswd -a postgres ssl-cert >/dev/null", timeout=60)
    if not lab.health(PG_HOST, ["postgres"])["postgres"].healthy:
        lab.exec(PG_HOST, "service postgresql restart", timeout=90)
        lab.wait_health(PG_HOST, ["postgres"], timeout=90)


@pytest.fixture
def systemd_nginx(mixed_lab, tmp_path_factory):
    require_docker()
    lab = mixed_lab
    assert lab.kind(SD_HOST) == "systemd"
    inventory = lab.write_inventory(tmp_path_factory.mktemp("kg-runs-as") / "hosts.yml")
    with service_scene(lab, SD_HOST, "nginx", setup=HOOK_SETUP, teardown=HOOK_TEARDOWN, check=True):
        yield lab, inventory


def test_a_lost_group_of_the_service_account_is_put_back_without_the_model_or_a_human(postgres_host, tmp_path):
    lab, inventory = postgres_host
    work = Workspace(tmp_path, inventory)  # no LLM configured
    healthy = _run(work, PG_HOST)  # as a watch would: the healthy pass records the baseline
    assert healthy.status == "successful", healthy.stdout[-3000:]
    assert healthy.outcomes()[(PG_HOST, "postgresql")]["state"] == "healthy"
    group_file = lab.exec(PG_HOST, ["sha256sum", "/etc/group"], check=True).stdout.split()[0]

    lab.inject(PG_HOST, "postgres_ssl_key_group_lost")  # the fault of the catalogue, for real
    assert "ssl-cert" not in groups(lab, PG_HOST)
    assert not lab.health(PG_HOST, ["postgres"])["postgres"].healthy

    run = _run(work, PG_HOST)
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(PG_HOST, "postgresql")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 1, json.dumps(outcome, indent=1)[:4000]
    restored = _known_good_commands(outcome)
    assert [c["command"] for c in restored][:1] == ["gpasswd -a postgres ssl-cert"], restored
    assert restored[0]["verdict"] == "allow" and restored[0]["rc"] == 0, restored[0]
    assert "postgres lost its membership of ssl-cert" in outcome["timeline"][0]["diagnosis"]
    # From inside the container: the account is in its group again, PostgreSQL answers its check,
    # and the account database is byte for byte what it was at the healthy pass.
    assert "ssl-cert" in groups(lab, PG_HOST)
    assert lab.health(PG_HOST, ["postgres"])["postgres"].healthy
    assert lab.exec(PG_HOST, ["sha256sum", "/etc/group"], check=True).stdout.split()[0] == group_file


# A second cause the restored membership does not remove: a setting PostgreSQL cannot parse in
# the data directory's postgresql.auto.conf (ALTER SYSTEM's file, not part of the baseline).
AUTO_CONF = "/var/lib/postgresql/15/main/postgresql.auto.conf"
SECOND_CAUSE = f"cp -p {AUTO_CONF} /root/.kg-auto.conf && echo \"max_connections = 'many'\" >> {AUTO_CONF}"
SECOND_CAUSE_GONE = f"test ! -e /root/.kg-auto.conf || mv /root/.kg-auto.conf {AUTO_CONF}"


def test_a_membership_put_back_by_an_attempt_that_did_not_heal_is_undone(postgres_host, tmp_path):
    lab, inventory = postgres_host
    work = Workspace(tmp_path, inventory)  # no LLM configured
    assert _run(work, PG_HOST).status == "successful"  # the healthy pass
    lab.inject(PG_HOST, "postgres_ssl_key_group_lost")
    try:
        lab.exec(PG_HOST, SECOND_CAUSE, check=True)
        drifted = lab.exec(PG_HOST, "sha256sum /etc/group /etc/gshadow; stat -c '%a %U:%G' /etc/group /etc/gshadow",
                           check=True).stdout
        run = _run(work, PG_HOST, remediate_max_retries=1)
    finally:
        lab.exec(PG_HOST, SECOND_CAUSE_GONE, check=True)
    outcome = run.outcomes()[(PG_HOST, "postgresql")]
    assert outcome["state"] == "escalated", json.dumps(outcome, indent=1)[:4000]
    restored = _known_good_commands(outcome)
    assert restored and restored[0]["command"] == "gpasswd -a postgres ssl-cert" and restored[0]["rc"] == 0, restored
    # From inside the container: the account files are byte for byte (and mode, owner) as before the attempt.
    assert lab.exec(PG_HOST, "sha256sum /etc/group /etc/gshadow; stat -c '%a %U:%G' /etc/group /etc/gshadow",
                    check=True).stdout == drifted
    assert "ssl-cert" not in groups(lab, PG_HOST)
    records = [json.loads(line) for line in (run.artifacts_dir / "journal" / f"{PG_HOST}.jsonl").read_text().splitlines()]
    assert any("/etc/group" in json.dumps(r) for r in records if r.get("kind") == "undo"), records[-3:]


def test_a_membership_the_account_never_held_waits_for_a_human_and_a_privileged_one_is_refused(
        postgres_host, tmp_path):
    lab, inventory = postgres_host
    with LLMServer(default=plan("service postgresql restart")) as server:
        work = Workspace(tmp_path, inventory, llm_url=server.url)
        healthy = _run(work, PG_HOST, remediate_backend="llm")
        assert healthy.status == "successful", healthy.stdout[-3000:]
    # The key's group is changed to one postgres was never in: a permission failure no baseline explains.
    lab.exec(PG_HOST, f"groupadd -f sentinel-kg-never && chgrp sentinel-kg-never {KEY} && "
                      "service postgresql restart >/dev/null 2>&1; sleep 2", timeout=90)
    lab.wait_health(PG_HOST, ["postgres"], healthy=False, timeout=60)
    for command, state in (("gpasswd -a postgres sentinel-kg-never", "waiting_approval"),
                           ("gpasswd -a postgres sudo", "escalated")):
        asked = plan(command, "service postgresql start")
        with LLMServer(replies=[asked], default=asked) as server:
            run = _run(Workspace(tmp_path / state, inventory, llm_url=server.url), PG_HOST, remediate_backend="llm",
                       remediate_max_retries=1)
        # An escalation hands over to a human by failing the host's play.
        assert run.status == ("successful" if state == "waiting_approval" else "failed"), run.stdout[-3000:]
        outcome = run.outcomes()[(PG_HOST, "postgresql")]
        assert outcome["state"] == state, json.dumps(outcome, indent=1)[:4000]
        if state == "escalated":
            assert "privileged_groups" in json.dumps(outcome), json.dumps(outcome, indent=1)[:4000]
        assert not _known_good_commands(outcome)  # the baseline explains nothing here
        # Nothing ran: the account is in neither group, PostgreSQL still fails its check.
        assert not {"sentinel-kg-never", "sudo"} & set(groups(lab, PG_HOST))
        assert not lab.health(PG_HOST, ["postgres"])["postgres"].healthy


def test_a_unit_program_that_lost_its_exec_bit_gets_its_mode_back_without_the_model_or_a_human(
        systemd_nginx, tmp_path):
    lab, inventory = systemd_nginx
    work = Workspace(tmp_path, inventory)  # no LLM configured
    healthy = _run(work, SD_HOST)
    assert healthy.status == "successful", healthy.stdout[-3000:]
    assert healthy.outcomes()[(SD_HOST, "nginx")]["state"] == "healthy"

    rendered = lab.exec(SD_HOST, ["stat", "-c", "%i", RENDERED], check=True).stdout.strip()
    lab.exec(SD_HOST, HOOK_DRIFT, check=True, timeout=60)
    assert lab.exec(SD_HOST, ["stat", "-c", "%a", HOOK], check=True).stdout.strip() == "644"
    assert not lab.health(SD_HOST, ["nginx"])["nginx"].healthy

    run = _run(work, SD_HOST)
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(SD_HOST, "nginx")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 1, json.dumps(outcome, indent=1)[:4000]
    restored = _known_good_commands(outcome)
    assert [c["command"] for c in restored] == [f"chmod 0755 {HOOK}", "systemctl restart nginx.service"], restored
    assert restored[0]["verdict"] == "allow" and restored[0]["rc"] == 0, restored[0]
    # From inside the container: the program's mode is back, the hook ran again (it renders its
    # file anew: another inode), nginx serves.
    assert lab.exec(SD_HOST, ["stat", "-c", "%a %U:%G", HOOK], check=True).stdout.strip() == "755 root:root"
    assert lab.exec(SD_HOST, ["stat", "-c", "%i", RENDERED], check=True).stdout.strip() != rendered
    assert lab.health(SD_HOST, ["nginx"])["nginx"].healthy
