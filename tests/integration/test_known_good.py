"""Known-good first and autonomy by effect class, on the lab. A healthy pass records nginx's
configuration; a drift injected after it is healed by putting the known-good version back,
without the model, and the human is told with the diff. The autonomy table lets a reversible
step of the service run without approval and keeps an invented value waiting. Everything is
asserted from inside the container (bytes, the store, what nginx serves)."""
from __future__ import annotations

import json

import pytest

from lab_scene import forget_known_good, service_scene
from llm_server import LLMServer
from sentinel_lab import kind_group_vars
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"
CONF = "/etc/nginx/nginx.conf"
MADE = "/etc/nginx/sentinel-autonomy-made"
# A bad deploy adds a directive nginx does not know at the top level of its main file, then nginx
# is restarted by hand: the restart refuses the configuration and nginx stays down.
DRIFT = (f"printf 'sentinel_drift on;\\n' >> {CONF}; service nginx stop >/dev/null 2>&1; "
         "pkill -x nginx; sleep 1; ! pgrep -x nginx")
STORE = "/var/lib/sentinel-remediation/content/objects"


def plan(*commands: str) -> dict:
    return {"plan": {"diagnosis": "scripted", "commands": list(commands), "rationale": "scripted"}}


def sha256(lab, path: str, host: str = HOST) -> str:
    return lab.exec(host, ["sha256sum", path], check=True).stdout.split()[0]


@pytest.fixture
def nginx_host(lab, lab_inventory):
    require_docker()
    forget_known_good(lab, HOST)  # this module's baselines only, recorded by its own healthy passes
    good = lab.exec(HOST, ["cat", CONF], check=True).stdout
    yield lab, lab_inventory
    lab.exec(HOST, f"sed -i '/^sentinel_drift on;$/d' {CONF}; rm -rf {MADE}")
    forget_known_good(lab, HOST)  # the shared host: the next module's scene is not drift from this one's
    if not lab.health(HOST, ["nginx"])["nginx"].healthy or lab.exec(HOST, ["cat", CONF]).stdout != good:
        lab.reset(HOST)


def _run(work: Workspace, **extra):
    return work.run(extravars={"remediate_backend": "llm", "remediate_hosts": HOST, "remediate_canary_size": 0,
                               **extra})


def test_a_drift_after_a_healthy_pass_is_healed_by_restoring_known_good_without_the_model(nginx_host, tmp_path):
    lab, inventory = nginx_host
    with LLMServer(default=plan("service nginx restart")) as server:
        work = Workspace(tmp_path, inventory, llm_url=server.url)
        healthy = _run(work)  # as a watch would: the healthy pass records the baseline
        assert healthy.status == "successful", healthy.stdout[-3000:]
        assert healthy.outcomes()[(HOST, "nginx")]["state"] == "healthy"
        good = sha256(lab, CONF)
        lab.exec(HOST, DRIFT, check=True)
        bad = sha256(lab, CONF)
        assert not lab.health(HOST, ["nginx"])["nginx"].healthy
        run = _run(work)
        asked = [r for r in server.requests if r["path"].endswith("/chat/completions")]
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 1, outcome
    assert asked == []  # the model was never asked
    # From inside the container: the known-good bytes are back, nginx serves, the bad version is kept.
    assert sha256(lab, CONF) == good
    assert lab.health(HOST, ["nginx"])["nginx"].healthy
    kept = lab.exec(HOST, ["cat", f"{STORE}/{bad[:2]}/{bad[2:]}"], check=True).stdout
    assert kept.endswith("sentinel_drift on;\n")
    # The human is told, with the diff: the report and the journal.
    first = outcome["timeline"][0]
    assert first["source"] == "known_good", first
    assert f"{CONF} drifted from its last known-good version" in first["diagnosis"]
    assert "+sentinel_drift on;" in first["diagnosis"] and bad in first["diagnosis"], first["diagnosis"]
    records = [json.loads(line) for line in (run.artifacts_dir / "journal" / f"{HOST}.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["kind"] == "known_good"]
    assert record["restored"][0]["path"] == CONF and "+sentinel_drift on;" in record["restored"][0]["diff"]


SITE_COPY = "/etc/nginx/sites-enabled/default.bak"


def test_a_copy_of_a_known_good_file_left_where_it_is_read_is_taken_out_without_the_model(nginx_host, tmp_path):
    """`cp default default.bak` inside sites-enabled (the lab fault nginx_site_copy_in_sites_enabled):
    the copy's lines speak of TLS, which alone would keep it for a human (a drift may be a deliberate
    tightening), but every line of it is the known-good site's, still in effect: taking it out takes
    nothing away. Healed from known-good, without the model; the copy's bytes kept on the host."""
    lab, inventory = nginx_host
    try:
        with LLMServer(default=plan("service nginx restart")) as server:
            work = Workspace(tmp_path, inventory, llm_url=server.url)
            assert _run(work).outcomes()[(HOST, "nginx")]["state"] == "healthy"
            lab.inject(HOST, "nginx_site_copy_in_sites_enabled")
            copy = sha256(lab, SITE_COPY)
            assert copy == sha256(lab, "/etc/nginx/sites-available/default")
            assert "ssl" in lab.exec(HOST, ["cat", SITE_COPY], check=True).stdout
            run = _run(work)
            asked = [r for r in server.requests if r["path"].endswith("/chat/completions")]
        outcome = run.outcomes()[(HOST, "nginx")]
        assert outcome["state"] == "healed" and outcome["timeline"][0]["source"] == "known_good", outcome
        assert asked == []
        assert lab.exec(HOST, ["test", "-e", SITE_COPY]).rc == 1
        assert lab.exec(HOST, ["readlink", "/etc/nginx/sites-enabled/default"], check=True).stdout.strip() \
            == "/etc/nginx/sites-available/default"
        assert lab.exec(HOST, ["sha256sum", f"{STORE}/{copy[:2]}/{copy[2:]}"], check=True).stdout.split()[0] == copy
        assert lab.health(HOST, ["nginx"])["nginx"].healthy
    finally:
        lab.exec(HOST, ["rm", "-f", SITE_COPY])


def test_the_autonomy_table_runs_a_reversible_step_alone_and_keeps_an_invented_value_waiting(nginx_host, tmp_path):
    lab, inventory = nginx_host
    good = sha256(lab, CONF)
    lab.inject(HOST, "nginx_stopped")
    reversible = plan(f"mkdir -p {MADE}", "service nginx start")
    with LLMServer(replies=[reversible], default=reversible) as server:
        run = _run(Workspace(tmp_path / "alone", inventory, llm_url=server.url))
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healed", outcome  # no approval asked, none given
    assert lab.exec(HOST, ["test", "-d", MADE]).rc == 0
    ran = [c for c in outcome["commands"] if c.get("command", "").startswith("mkdir")]
    assert ran and ran[0]["rc"] == 0 and ran[0]["verdict"] == "allow", ran

    # The same step, with the operator's table setting its class to `human`: it waits.
    lab.exec(HOST, f"rm -rf {MADE}", check=True)
    lab.inject(HOST, "nginx_stopped")
    with LLMServer(replies=[reversible], default=reversible) as server:
        owned = _run(Workspace(tmp_path / "owned", inventory, llm_url=server.url),
                     remediate_policy={"autonomy": {"create_directory": "human"}})
    assert owned.status == "successful", owned.stdout[-3000:]
    assert owned.outcomes()[(HOST, "nginx")]["state"] == "waiting_approval"
    assert lab.exec(HOST, ["test", "-e", MADE]).rc != 0

    invented = plan(f"sed -i s/worker_connections/worker_rlimit_nofile/ {CONF}", "service nginx start")
    with LLMServer(replies=[invented], default=invented) as server:
        held = _run(Workspace(tmp_path / "held", inventory, llm_url=server.url))
    assert held.status == "successful", held.stdout[-3000:]
    outcome = held.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "waiting_approval", outcome
    assert sha256(lab, CONF) == good  # nothing ran: the file is as it was
    assert not lab.health(HOST, ["nginx"])["nginx"].healthy


SD_HOST = "lab02"  # the systemd host of the confinement tests' mixed lab (shared, not a new one)
UNIT_DIR = "/etc/systemd/system/nginx.service.d"
NEW_DROP_IN = f"{UNIT_DIR}/20-render-upstreams.conf"  # lab/faults.yml nginx_prestart_hook_not_executable
HOLD_DROP_IN = f"{UNIT_DIR}/50-freeze.conf"
FLAG = "/etc/nginx/FROZEN"
# The web team freezes nginx for a certificate migration: a condition on a flag file, and the flag.
HOLD = (f"mkdir -p {UNIT_DIR} && printf '%s\\n' '[Unit]' '# WEB-77: no start while {FLAG} exists' "
        f"'ConditionPathExists=!{FLAG}' > {HOLD_DROP_IN} && "
        f"printf 'WEB-77: frozen for the certificate migration; the web team removes this file.\\n' > {FLAG} && "
        "systemctl daemon-reload && systemctl stop nginx")
UNIT_TEARDOWN = (f"rm -f {NEW_DROP_IN} {HOLD_DROP_IN} {FLAG} /usr/local/sbin/render-upstreams; rmdir {UNIT_DIR} 2>/dev/null; "
                 "systemctl daemon-reload; systemctl reset-failed nginx; systemctl restart nginx")


@pytest.fixture
def systemd_nginx(mixed_lab, tmp_path_factory):
    require_docker()
    lab = mixed_lab
    assert lab.kind(SD_HOST) == "systemd"
    inventory = lab.write_inventory(tmp_path_factory.mktemp("kg-new-files") / "hosts.yml")
    forget_known_good(lab, SD_HOST)
    with service_scene(lab, SD_HOST, "nginx", setup=UNIT_TEARDOWN, teardown=UNIT_TEARDOWN):
        yield lab, inventory
    forget_known_good(lab, SD_HOST)


def _run_nginx(work: Workspace):
    nginx = [d for d in kind_group_vars("systemd")["remediate_services"] if d["name"] == "nginx"]
    return work.run(extravars={"remediate_hosts": SD_HOST, "remediate_canary_size": 0, "remediate_services": nginx})


def test_a_new_drop_in_after_a_healthy_pass_is_taken_out_alone_and_a_hold_is_left_to_its_owner(systemd_nginx, tmp_path):
    lab, inventory = systemd_nginx
    work = Workspace(tmp_path, inventory)  # no LLM configured, no approval given
    healthy = _run_nginx(work)  # as a watch would: the healthy pass records the baseline
    assert healthy.status == "successful", healthy.stdout[-3000:]
    assert healthy.outcomes()[(SD_HOST, "nginx")]["state"] == "healthy"

    lab.inject(SD_HOST, "nginx_prestart_hook_not_executable")  # a new drop-in whose hook cannot run (203/EXEC)
    bad = sha256(lab, NEW_DROP_IN, SD_HOST)
    assert not lab.health(SD_HOST, ["nginx"])["nginx"].healthy
    run = _run_nginx(work)
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(SD_HOST, "nginx")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 1, json.dumps(outcome, indent=1)[:4000]
    ran = [c for c in outcome["commands"] if c.get("source") == "known_good"]
    assert [c["command"] for c in ran] == [f"rm -f {NEW_DROP_IN}", "systemctl daemon-reload",
                                           "systemctl restart nginx.service"], ran
    assert all(c["verdict"] == "allow" and c["rc"] == 0 for c in ran), ran
    # From inside the container: the drop-in is gone from the unit's directory, its bytes are in
    # the host's store, systemd no longer reads it, nginx passes the lab's own check.
    assert lab.exec(SD_HOST, ["test", "-e", NEW_DROP_IN]).rc != 0
    kept = lab.exec(SD_HOST, ["cat", f"{STORE}/{bad[:2]}/{bad[2:]}"], check=True).stdout
    assert "ExecStartPre=/usr/local/sbin/render-upstreams" in kept
    assert "20-render-upstreams" not in lab.exec(SD_HOST, ["systemctl", "show", "-p", "DropInPaths", "nginx"]).stdout
    assert lab.health(SD_HOST, ["nginx"])["nginx"].healthy
    # The human is told: what was taken out, where its bytes are kept, the diff.
    assert f"{NEW_DROP_IN} is new since the last healthy pass; took it out" in outcome["timeline"][0]["diagnosis"]
    assert bad in outcome["timeline"][0]["diagnosis"]
    records = [json.loads(line) for line in (run.artifacts_dir / "journal" / f"{SD_HOST}.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["kind"] == "known_good"]
    assert record["restored"][0]["change"] == "new" and record["restored"][0]["aside"] == bad
    assert "+ExecStartPre=/usr/local/sbin/render-upstreams" in record["restored"][0]["diff"]

    # A hold: a new drop-in with a condition on a flag file, and the flag. The owner's: untouched.
    assert _run_nginx(work).outcomes()[(SD_HOST, "nginx")]["state"] == "healthy"  # the baseline again
    lab.exec(SD_HOST, HOLD, check=True, timeout=60)
    held = lab.exec(SD_HOST, f"sha256sum {HOLD_DROP_IN} {FLAG}", check=True).stdout
    assert not lab.health(SD_HOST, ["nginx"])["nginx"].healthy
    run = _run_nginx(Workspace(tmp_path / "hold", inventory))
    outcome = run.outcomes()[(SD_HOST, "nginx")]
    assert outcome["state"] != "healed", json.dumps(outcome, indent=1)[:4000]
    assert not [c for c in outcome["commands"] if c.get("source") == "known_good"], outcome["commands"]
    assert lab.exec(SD_HOST, f"sha256sum {HOLD_DROP_IN} {FLAG}", check=True).stdout == held
    assert not lab.health(SD_HOST, ["nginx"])["nginx"].healthy


JOURNALD_DROP_IN = "/etc/systemd/journald.conf.d/60-ssd-wear.conf"  # lab/faults.yml journald_storage_volatile_dropin
JOURNALD_TEARDOWN = f"rm -f {JOURNALD_DROP_IN}; systemctl restart systemd-journald"


def test_a_new_journald_drop_in_where_the_definition_names_system_paths_is_taken_out_alone(mixed_lab, tmp_path):
    """journald's configuration lives under /etc/systemd, where the policy gates every change for
    a human: only going back to the recorded state (a file new since the healthy pass, its bytes
    kept) runs alone there. The drop-in that turned the persistent journal off is taken out
    without the model and without approval, and journald writes /var/log/journal again (the lab's
    own check, which sends a message and looks for it there)."""
    require_docker()
    lab = mixed_lab
    inventory = lab.write_inventory(tmp_path / "hosts.yml")
    journald = [d for d in kind_group_vars("systemd")["remediate_services"] if d["name"] == "systemd-journald"]
    forget_known_good(lab, SD_HOST)
    with service_scene(lab, SD_HOST, "journald", setup=JOURNALD_TEARDOWN, teardown=JOURNALD_TEARDOWN):
        work = Workspace(tmp_path, inventory)  # no LLM configured, no approval given
        extra = {"remediate_hosts": SD_HOST, "remediate_canary_size": 0, "remediate_services": journald}
        assert work.run(extravars=extra).outcomes()[(SD_HOST, "systemd-journald")]["state"] == "healthy"
        lab.inject(SD_HOST, "journald_storage_volatile_dropin")
        bad = sha256(lab, JOURNALD_DROP_IN, SD_HOST)
        assert not lab.health(SD_HOST, ["journald"])["journald"].healthy
        run = work.run(extravars=extra)
        outcome = run.outcomes()[(SD_HOST, "systemd-journald")]
        assert outcome["state"] == "healed", json.dumps(outcome, indent=1)[:4000]
        ran = [c for c in outcome["commands"] if c.get("source") == "known_good"]
        assert ran and ran[0]["command"] == f"rm -f {JOURNALD_DROP_IN}", ran
        assert all(c["verdict"] == "allow" and c["rc"] == 0 for c in ran), ran
        assert lab.exec(SD_HOST, ["test", "-e", JOURNALD_DROP_IN]).rc != 0
        assert "Storage=volatile" in lab.exec(SD_HOST, ["cat", f"{STORE}/{bad[:2]}/{bad[2:]}"], check=True).stdout
        assert lab.health(SD_HOST, ["journald"])["journald"].healthy
    forget_known_good(lab, SD_HOST)


APP_CONF = "/etc/sentinel-app/app.conf"
APP_SAVED = "/root/app.conf.sentinel-test"
APP_SETUP = f"cp -p {APP_CONF} {APP_SAVED} && cp -p /var/log/dpkg.log /root/dpkg.log.sentinel-test"
APP_TEARDOWN = (f"cp -p {APP_SAVED} {APP_CONF}; rm -f {APP_CONF}.dpkg-old {APP_SAVED}; "
                "cp -p /root/dpkg.log.sentinel-test /var/log/dpkg.log; rm -f /root/dpkg.log.sentinel-test; "
                "service sentinel-app restart >/dev/null 2>&1")


def test_a_configuration_its_package_replaced_goes_back_to_known_good_alone(lab, lab_inventory, tmp_path):
    """An upgrade installed the package's app.conf (a placeholder password) and dpkg kept the
    host's as app.conf.dpkg-old. Its new lines speak of a password, which alone would keep the
    restore for a human (a drift may be a deliberate rotation), but nobody chose them: the file is
    put back from known-good without the model and without approval, byte for byte, with the mode
    and owner it had, and the app answers again (the lab's own check)."""
    require_docker()
    app = [d for d in kind_group_vars("sysv")["remediate_services"] if d["name"] == "sentinel-app"]
    forget_known_good(lab, HOST)
    with service_scene(lab, HOST, "app", setup=APP_SETUP, teardown=APP_TEARDOWN, check=True):
        good = lab.exec(HOST, ["stat", "-c", "%a %U:%G", APP_CONF], check=True).stdout.strip()
        work = Workspace(tmp_path, lab_inventory)  # no LLM configured, no approval given
        extra = {"remediate_hosts": HOST, "remediate_canary_size": 0, "remediate_services": app}
        assert work.run(extravars=extra).outcomes()[(HOST, "sentinel-app")]["state"] == "healthy"
        good_sha = sha256(lab, APP_CONF)
        lab.inject(HOST, "app_config_replaced_by_package_default")
        assert not lab.health(HOST, ["app"])["app"].healthy
        run = work.run(extravars=extra)
        outcome = run.outcomes()[(HOST, "sentinel-app")]
        assert outcome["state"] == "healed", json.dumps(outcome, indent=1)[:4000]
        assert outcome["timeline"][0]["source"] == "known_good", outcome["timeline"]
        assert [c["verdict"] for c in outcome["commands"]] == ["allow"] * len(outcome["commands"]), outcome["commands"]
        assert sha256(lab, APP_CONF) == good_sha
        assert lab.exec(HOST, ["stat", "-c", "%a %U:%G", APP_CONF], check=True).stdout.strip() == good
        assert lab.health(HOST, ["app"])["app"].healthy
    forget_known_good(lab, HOST)
