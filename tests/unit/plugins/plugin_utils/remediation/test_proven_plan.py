# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary is for unproven plans (proven.py, AttemptLoop._canary): a plan the fleet's memory
shows healed this very failure on at least canary_size hosts runs without one; an unproven plan
still canaries, and a canary that does not heal still stops the hosts after it."""
from __future__ import annotations

import json

from .conftest import FakeHost

WIDGET = {"name": "widgetd", "units": ["widgetd.service"], "processes": ["widgetd"], "checks": [{"type": "service"}]}
FAILURE = "widgetd: GET http://127.0.0.1:7000/health answers 500"
RESTART = "systemctl restart widgetd"


def rollouts(tmp_path, state: str, host: str = "web1") -> list[dict]:
    path = tmp_path / state / "journal" / f"{host}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if r.get("kind") == "rollout"]


def heal(make_run, tmp_path, state: str, *, facts=None, name="web1", verify=(True,), **args):
    host = FakeHost(error=FAILURE, verify=verify)
    done = make_run(host, services=[WIDGET], fallback_restart=True, facts=facts, name=name,
                    artifacts_dir=str(tmp_path / state), **args).run()
    (outcome,) = done.outcomes
    return host, outcome, done.facts


def learned(make_run, tmp_path, hosts=("web1",)) -> list[dict]:
    """The memory of hosts that each healed the failure once, canary first (an unproven plan)."""
    episodes = []
    for index, name in enumerate(hosts):
        host, outcome, facts = heal(make_run, tmp_path, f"learn{index}", name=name)
        assert host.ran() == [RESTART] and outcome["state"] == "healed", outcome
        assert "canary" in outcome["safeguards"] and "proven_plan" not in outcome["safeguards"], outcome
        episodes += [e for e in facts["sentinel_memory"] if e["host"] == name]
    return episodes


def test_a_plan_proven_on_as_many_hosts_as_the_canary_runs_without_one(make_run, tmp_path):
    memory = learned(make_run, tmp_path, hosts=("web1",))
    host, outcome, _facts = heal(make_run, tmp_path, "again", facts={"sentinel_memory": memory})
    assert host.ran() == [RESTART] and outcome["state"] == "healed", outcome
    assert "proven_plan" in outcome["safeguards"] and "canary" not in outcome["safeguards"], outcome
    (record,) = rollouts(tmp_path, "again")
    assert record["action"] == "proven" and not record["canary"], record
    assert record["detail"].startswith("no canary: this plan healed this failure on 1 hosts before (web1)"), record


def test_a_plan_proven_on_fewer_hosts_than_the_canary_still_canaries(make_run, tmp_path):
    memory = learned(make_run, tmp_path, hosts=("web1",))
    host, outcome, _facts = heal(make_run, tmp_path, "again", facts={"sentinel_memory": memory}, canary_size=2)
    assert host.ran() == [RESTART] and "canary" in outcome["safeguards"], outcome
    assert "proven_plan" not in outcome["safeguards"], outcome
    assert [r["action"] for r in rollouts(tmp_path, "again")] == ["go"]


def test_a_plan_whose_last_run_did_not_heal_canaries_and_a_failed_canary_stops_the_next_host(make_run, tmp_path):
    memory = learned(make_run, tmp_path, hosts=("web1",))
    # The same plan ran once more on web1 and did not heal: no longer proven.
    memory.append(dict(memory[-1], success=False, finished="2999-01-01T00:00:00Z"))
    host, outcome, _facts = heal(make_run, tmp_path, "again", facts={"sentinel_memory": memory},
                                 verify=(False,), max_attempts=1)
    assert host.ran() == [RESTART] and "canary" in outcome["safeguards"], outcome
    assert outcome["state"] != "healed", outcome
    # web2, in the same run, after the canary web1 did not heal: nothing runs there.
    other, stopped, _facts = heal(make_run, tmp_path, "again", facts={"sentinel_memory": memory}, name="web2")
    assert other.ran() == [] and stopped["state"] == "escalated", stopped
    assert "rollout_stopped" in stopped["safeguards"], stopped
    assert stopped["reason"].startswith("rollout stopped: the canary web1 ran this plan and it did not heal"), stopped


def sent_ahead(host: FakeHost) -> list[str]:
    return [fix["service"] for name, args in host.calls if name == "sentinel.remediation.service_health"
            for fix in args.get("remembered") or []]


def test_a_remembered_fix_goes_ahead_only_when_proven_on_as_many_hosts_as_the_canary(make_run, tmp_path):
    memory = learned(make_run, tmp_path, hosts=("web1",))
    host = FakeHost(error=FAILURE, remembered_ran=True)
    make_run(host, services=[WIDGET], fallback_restart=True, facts={"sentinel_memory": memory},
             artifacts_dir=str(tmp_path / "ahead")).run()
    assert sent_ahead(host) == ["widgetd"]
    # With a canary of 2 the one host's proof is not enough: the fix is not sent unseen, it canaries.
    host, outcome, _facts = heal(make_run, tmp_path, "canary", facts={"sentinel_memory": memory}, canary_size=2)
    assert sent_ahead(host) == [] and host.ran() == [RESTART], host.calls
    assert "canary" in outcome["safeguards"], outcome
