"""Known-good first and autonomy by effect class, on the lab. A healthy pass records nginx's
configuration; a drift injected after it is healed by putting the known-good version back,
without the model, and the human is told with the diff. The autonomy table lets a reversible
step of the service run without approval and keeps an invented value waiting. Everything is
asserted from inside the container (bytes, the store, what nginx serves)."""
from __future__ import annotations

import json

import pytest

from llm_server import LLMServer
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


def sha256(lab, path: str) -> str:
    return lab.exec(HOST, ["sha256sum", path], check=True).stdout.split()[0]


@pytest.fixture
def nginx_host(lab, lab_inventory):
    require_docker()
    good = lab.exec(HOST, ["cat", CONF], check=True).stdout
    yield lab, lab_inventory
    lab.exec(HOST, f"sed -i '/^sentinel_drift on;$/d' {CONF}; rm -rf {MADE}")
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
