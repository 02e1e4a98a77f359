# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stateful service's restart when it serves no client, on the lab (issues 27 and 29).

PostgreSQL is moved to the wrong port for real (lab/faults.yml postgres_port_changed) after a
healthy pass. Nothing can reach it, so it serves no client: the known-good restore puts the
port back and restarts it with no LLM and no approval. The same fault with a client session
open to the server keeps the restart for a human, and the session lives on; so does a session
opened after the evidence was read (while the model plans): the host finds it just before the
restart, does not run it, and the plan waits for a human, whose approval through resume.yml runs
it. Asserted from inside the container: the config's bytes, what listens, the backend's PID,
the lab's check."""
from __future__ import annotations

import json

import pytest

from llm_server import LLMServer
from sentinel_lab import kind_group_vars
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"  # a SysV host of the session lab
CONF = "/etc/postgresql/15/main/postgresql.conf"
SLEEP = "select pg_sleep(900)"
# A client of the server on its wrong port, through the unix socket, as its own session.
CLIENT = (f"setsid runuser -u postgres -- psql -X -p 5433 -h /var/run/postgresql -c '{SLEEP}' "
          ">/dev/null 2>&1 < /dev/null &")
BACKEND = ("runuser -u postgres -- psql -X -At -p {port} -h /var/run/postgresql -c "
           f"\"select pid from pg_stat_activity where query = '{SLEEP}'\"")
PUT_BACK = (f"pkill -f '{SLEEP}'; sed -i 's/^port = 5433/port = 5432/' {CONF}; "
            "grep -q '^port = 5432' " + CONF + " && (ss -ltnH 'sport = :5432' | grep -q LISTEN || service postgresql restart)")


def _backend(lab, port: int) -> str:
    """The PID of the client session's backend, once it is there."""
    found = ""
    for _attempt in range(50):
        found = lab.exec(HOST, BACKEND.format(port=port)).stdout.strip()
        if found:
            break
        lab.exec(HOST, "sleep 0.2")
    return found


def _run(work: Workspace, playbook: str = "remediate.yml", **extra):
    postgres = [d for d in kind_group_vars("sysv")["remediate_services"] if d["name"] == "postgresql"]
    return work.run(playbook, extravars={"remediate_hosts": HOST, "remediate_canary_size": 0,
                                         "remediate_services": postgres, **extra})


@pytest.fixture
def moved_postgres(lab, lab_inventory, tmp_path):
    """A healthy pass (the baseline), then PostgreSQL moved to port 5433 for real."""
    require_docker()
    lab.wait_health(HOST, ["postgres"], timeout=90)
    good = lab.exec(HOST, ["sha256sum", CONF], check=True).stdout.split()[0]
    work = Workspace(tmp_path, lab_inventory)  # no LLM configured
    healthy = _run(work)
    assert healthy.status == "successful", healthy.stdout[-3000:]
    assert healthy.outcomes()[(HOST, "postgresql")]["state"] == "healthy"
    lab.inject(HOST, "postgres_port_changed")
    assert not lab.health(HOST, ["postgres"])["postgres"].healthy
    yield lab, work, good
    lab.exec(HOST, PUT_BACK, timeout=90)
    lab.wait_health(HOST, ["postgres"], timeout=90)


def test_a_database_serving_no_client_is_put_back_on_its_port_and_restarted_without_a_human(moved_postgres):
    lab, work, good = moved_postgres
    run = _run(work)
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(HOST, "postgresql")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 1, json.dumps(outcome, indent=1)[:4000]
    assert outcome.get("approval") in (None, "", "none"), outcome.get("approval")
    ran = [c for c in outcome["commands"] if c.get("source") == "known_good"]
    assert [c["command"].split()[0] for c in ran] == ["cp", "service"], ran
    assert all(c["verdict"] == "allow" and c["rc"] == 0 for c in ran), ran
    assert "restart cost waived" in json.dumps(outcome), "the report does not say why the restart ran alone"
    # From inside the container: the config is byte for byte the healthy one, 5432 listens, the check passes.
    assert lab.exec(HOST, ["sha256sum", CONF], check=True).stdout.split()[0] == good
    assert lab.health(HOST, ["postgres"])["postgres"].healthy


def test_a_client_session_on_the_database_keeps_the_restart_for_a_human_and_lives_on(moved_postgres):
    lab, work, _good = moved_postgres
    lab.exec(HOST, CLIENT, check=True)
    backend = _backend(lab, 5433)
    assert backend.isdigit(), "the client session did not start"
    run = _run(work)
    outcome = run.outcomes()[(HOST, "postgresql")]
    assert outcome["state"] == "waiting_approval", json.dumps(outcome, indent=1)[:4000]
    planned = [c for c in outcome.get("planned") or outcome["commands"] if "restart" in str(c.get("command"))]
    assert planned and planned[0]["verdict"] == "approval", planned
    # From inside the container: the session's backend is the same process, still in its query.
    assert lab.exec(HOST, BACKEND.format(port=5433)).stdout.strip() == backend
    assert lab.exec(HOST, ["grep", "-c", "^port = 5433", CONF]).stdout.strip() == "1"


# The model's plan: a read, the restart that applies the configuration, a check after it.
PLAN = ["pg_lsclusters", "service postgresql restart", "pg_isready -h /var/run/postgresql -p 5432"]


class ClientWhilePlanning(LLMServer):
    """The model, and a client that connects while it plans: after the evidence (which counted
    none) was read, before any command of the plan runs."""

    def __init__(self, lab):
        super().__init__(default={"plan": {"diagnosis": "postgresql.conf says 5432; the server was started on 5433",
                                           "commands": PLAN, "rationale": "restart to apply the configuration"}})
        self.lab = lab
        self.backend = ""

    def next_reply(self, body, handler=None):
        if not self.backend:
            self.lab.exec(HOST, CLIENT, check=True)
            self.backend = _backend(self.lab, 5433)
        return super().next_reply(body, handler)


def test_a_client_that_connects_after_the_evidence_holds_the_restart_for_a_human_whose_approval_runs_it(moved_postgres):
    lab, work, good = moved_postgres
    # The failure is real (confirmed by the fixture's check): confirmed once here, to keep the test short.
    quick = [dict(d, confirm_attempts=1, confirm_interval=1) for d in kind_group_vars("sysv")["remediate_services"]
             if d["name"] == "postgresql"]
    # The configuration is right again, the server still runs on 5433: a restart heals it.
    lab.exec(HOST, ["sed", "-i", "s/^port = 5433/port = 5432/", CONF], check=True)
    with ClientWhilePlanning(lab) as server:
        work.llm_url = server.url
        run = _run(work, remediate_backend="llm", remediate_known_good=False, remediate_services=quick)
        assert server.backend.isdigit(), "the client session did not start"
        assert len(server.chat_requests) == 1, "the model was asked again after the restart was held"
    outcome = run.outcomes()[(HOST, "postgresql")]
    assert outcome["state"] == "waiting_approval", json.dumps(outcome, indent=1)[:4000]
    assert "would drop 1 client connection(s)" in outcome["reason"] and "a human should confirm" in outcome["reason"]
    ran = {c["command"]: c for c in outcome["commands"]}
    assert ran[PLAN[0]]["rc"] == 0, ran
    assert ran[PLAN[1]].get("rc") is None and ran[PLAN[2]].get("rc") is None, ran  # held, and nothing after it
    # From inside the container: the session's backend is the same process, on the same server.
    assert lab.exec(HOST, BACKEND.format(port=5433)).stdout.strip() == server.backend
    pending = json.loads((work.artifacts_dir / "pending" / f"{outcome['approval_id']}.json").read_text())
    assert [c["command"] for c in pending["commands"]] == PLAN

    resumed = _run(work, playbook="resume.yml", remediate_approve=outcome["approval_id"], remediate_services=quick)
    healed = resumed.outcomes()[(HOST, "postgresql")]
    assert healed["state"] == "healed", json.dumps(healed, indent=1)[:4000]
    assert [c["command"] for c in healed["commands"] if c.get("rc") == 0][-3:] == PLAN, healed["commands"]
    # The approved restart ran: the session's backend is gone, the server answers on 5432 again.
    assert not lab.exec(HOST, f"kill -0 {server.backend}").ok
    assert lab.exec(HOST, ["sha256sum", CONF], check=True).stdout.split()[0] == good
    assert lab.health(HOST, ["postgres"])["postgres"].healthy
