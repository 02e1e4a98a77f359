# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known-good first: a drift the failure names is restored ahead of the planner, without a
human when the autonomy table allows it, and the human is told with the diff."""
from __future__ import annotations

import json

from .conftest import FakeHost

STAGED = "/var/lib/sentinel-remediation/known-good/restore/" + "ab" * 32
SITE = "/etc/nginx/sites-enabled/default"
NGINX = {"name": "nginx", "units": ["nginx"], "processes": ["nginx"], "ports": [80], "config_paths": ["/etc/nginx"],
         "data_paths": ["/var/www"], "config_test": ["nginx", "-t"], "checks": [{"type": "service"}]}
DIFF = "--- known-good\n+++ now\n@@ -22 +22 @@\n-\tlisten 80 default_server;\n+\tlistn 80;"
DRIFTED = {"init": "systemd", "unit": {"ActiveState": "failed", "Result": "exit-code"}, "processes": [],
           "config_test": f"$ nginx -t\nrc 1\nnginx: [emerg] unknown directive \"listn\" in {SITE}:22",
           "known_good": {"recorded": 1, "files": 9, "drift": [
               {"path": SITE, "change": "modified", "known_good": "ab" * 32, "now": "cd" * 32, "restore": STAGED,
                "aside": "cd" * 32, "diff": DIFF}]}}


class DriftedHost(FakeHost):
    """A host whose failing nginx drifted from its known-good baseline."""

    def _health(self, args):
        out = super()._health(args)
        for row in out["services"]:
            if not row["healthy"]:
                row["evidence"] = DRIFTED
        return out


def _journal(tmp_path):
    path = tmp_path / "state" / "journal" / "web1.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_drift_the_failure_names_is_restored_first_without_the_planner_or_a_human(make_run, tmp_path):
    host = DriftedHost(error="nginx.service failed", verify=(True,))
    done = make_run(host, services=[NGINX], backend="llm").run()  # no LLM configured: the planner is never asked
    outcome = done.outcomes[0]
    assert outcome["state"] == "healed", outcome
    assert host.ran() == [f"cp -p {STAGED} {SITE}", "systemctl restart nginx"]
    attempt = done.incidents[0].attempts[0]
    assert attempt.source == "known_good" and not attempt.llm
    assert DIFF in attempt.diagnosis and "cd" * 32 in attempt.diagnosis  # the diff, and where the bad version is
    (record,) = [r for r in _journal(tmp_path) if r["kind"] == "known_good"]
    assert record["restored"] == [{"path": SITE, "change": "modified", "aside": "cd" * 32, "diff": DIFF}]
    assert any(DIFF in w for w in done.warnings)
    # The host keeps the file before the copy overwrites it: the attempt can be undone.
    (sent,) = [a for name, a in host.calls if name == "sentinel.remediation.execute_plan"]
    assert {"path": SITE, "tree": True} in sent["commands"][0]["keep"]


def test_the_restore_is_tried_once_then_the_planner_takes_over(make_run):
    host = DriftedHost(error="nginx.service failed", verify=(False, True))
    done = make_run(host, services=[NGINX], max_attempts=2).run()
    sources = [a.source for a in done.incidents[0].attempts]
    assert sources[0] == "known_good" and sources[1:] and "known_good" not in sources[1:], sources


def test_without_snapshots_a_restore_waits_for_a_human(make_run):
    host = DriftedHost(error="nginx.service failed")
    done = make_run(host, services=[NGINX], undo_unhealed=False).run()
    assert done.outcomes[0]["state"] == "waiting_approval", done.outcomes[0]
    assert host.ran() == []


def test_known_good_off_leaves_planning_to_the_usual_sources(make_run):
    host = DriftedHost(error="nginx.service failed")
    done = make_run(host, services=[NGINX], known_good=False).run()
    assert all(a.source != "known_good" for a in done.incidents[0].attempts)
    health = [a for name, a in host.calls if name == "sentinel.remediation.service_health"]
    assert health and health[0]["known_good"] is False
