# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stateful service's restart when it serves no client, on the lab (issues 27 and 29).

PostgreSQL is moved to the wrong port for real (lab/faults.yml postgres_port_changed) after a
healthy pass. Nothing can reach it, so it serves no client: the known-good restore puts the
port back and restarts it with no LLM and no approval. The same fault with a client session
open to the server keeps the restart for a human, and the session lives on. Asserted from
inside the container: the config's bytes, what listens, the backend's PID, the lab's check."""
from __future__ import annotations

import json

import pytest

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


def _run(work: Workspace, **extra):
    postgres = [d for d in kind_group_vars("sysv")["remediate_services"] if d["name"] == "postgresql"]
    return work.run(extravars={"remediate_hosts": HOST, "remediate_canary_size": 0, "remediate_services": postgres,
                               **extra})


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
    backend = ""
    for _attempt in range(50):
        backend = lab.exec(HOST, BACKEND.format(port=5433)).stdout.strip()
        if backend:
            break
        lab.exec(HOST, "sleep 0.2")
    assert backend.isdigit(), "the client session did not start"
    run = _run(work)
    outcome = run.outcomes()[(HOST, "postgresql")]
    assert outcome["state"] == "waiting_approval", json.dumps(outcome, indent=1)[:4000]
    planned = [c for c in outcome.get("planned") or outcome["commands"] if "restart" in str(c.get("command"))]
    assert planned and planned[0]["verdict"] == "approval", planned
    # From inside the container: the session's backend is the same process, still in its query.
    assert lab.exec(HOST, BACKEND.format(port=5433)).stdout.strip() == backend
    assert lab.exec(HOST, ["grep", "-c", "^port = 5433", CONF]).stdout.strip() == "1"
