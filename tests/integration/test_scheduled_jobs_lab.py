# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What runs on a schedule against a service reaches the model with the incident.

On a lab host a housekeeping job (lab/faults.yml postgres_socket_removed_by_cleanup_job: a
cron.d entry running a script that deletes week-old files under /run) has taken PostgreSQL's
socket. The model's request must carry the job: the cron.d line, and the script's line that
deletes under /run (the directory holding the service's /var/run/postgresql, as the host
resolves it), read on the host by the real module (asserted from what the test LLM server
received); and once the restart heals it, the outcome tells the human the job may break it
again."""
from __future__ import annotations

import pytest

from llm_server import LLMServer
from sentinel_lab import kind_group_vars
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"


def test_a_clean_up_job_that_deletes_under_the_services_runtime_directory_is_in_the_models_request(lab, tmp_path):
    require_docker()
    inventory = lab.write_inventory(tmp_path / "hosts.yml", services="kind")  # PostgreSQL among them
    restart = {"plan": {"diagnosis": "the socket is gone", "commands": ["service postgresql restart"],
                        "rationale": "the server makes its socket at start"}}
    try:
        lab.inject(HOST, "postgres_socket_removed_by_cleanup_job")
        with LLMServer(default=restart) as server:
            run = Workspace(tmp_path, inventory, llm_url=server.url).run(extravars={
                "remediate_backend": "llm", "remediate_hosts": HOST, "remediate_canary_size": 0,
                # a client connected when it runs makes the restart wait: approved here, the note is the point
                "remediate_auto_approve": True,
                "remediate_max_retries": 1, "remediate_services": [
                    d for d in kind_group_vars(lab.kind(HOST))["remediate_services"] if d["name"] == "postgresql"]})
            sent = "\n".join(str(r.get("body")) for r in server.requests if r["path"].endswith("/chat/completions"))
        assert sent, "the model was not asked"
        assert "scheduled_jobs" in sent and "/etc/cron.d/clean-stale-runtime" in sent, sent[-3000:]
        assert "root /usr/local/sbin/clean-stale-runtime" in sent
        assert "find /tmp /var/tmp /run -xdev -mindepth 2 -mtime +7 ! -type d -print -delete" in sent
        # Healed (the lab's own check); the human is told the job may break it again.
        outcome = run.outcomes()[(HOST, "postgresql")]
        assert outcome["state"] == "healed" and lab.health(HOST, ["postgres"])["postgres"].healthy, outcome
        assert "healed, but scheduled jobs act on postgresql: /etc/cron.d/clean-stale-runtime" in outcome["reason"]
    finally:
        lab.reset(HOST)  # the fault leaves the host changed for good (reset_after)
