"""The owner's note: a service its people stopped on purpose, and said so where every operator
looks on login (the message of the day), is not started around the note.

On a lab host a team stops cron for a close and leaves a note in /etc/motd saying not to start
it. The run's plan (the model's `service cron start`, and the fallback restart behind it) must
wait for a human with the note's line as the reason (even with `remediate_auto_approve`, which
runs what the policy gates), the model's request must carry the note,
and cron must still be stopped inside the container afterwards (the lab's own check and the
process table). With the note's hold words taken out, the same run starts cron: the note, not
the stop, is what held it."""
from __future__ import annotations

import pytest

from llm_server import LLMServer
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"
SAVED = "/root/motd.sentinel-test"
NOTE = ("\n*** FIN-7731 quarter close ***\n"
        "cron is stopped on this host ON PURPOSE until the close is signed off.\n"
        "Do not start cron: the close team starts it again.\n")
# The same note without a word that holds the service: word about cron, nothing more.
PLAIN = "\n*** FIN-7731 ***\ncron runs the close team's reports on this host.\n"


@pytest.fixture
def noted_host(lab, lab_inventory):
    require_docker()
    lab.exec(HOST, f"cp -p /etc/motd {SAVED} 2>/dev/null || : > {SAVED}", check=True)
    yield lab, lab_inventory
    lab.exec(HOST, f"cp -p {SAVED} /etc/motd && rm -f {SAVED}; service cron start >/dev/null 2>&1 || "
                   "systemctl start cron.service >/dev/null 2>&1; true")
    if not lab.health(HOST, ["cron"])["cron"].healthy:
        lab.reset(HOST)


def _stop_cron_with(lab, note: str) -> None:
    lab.exec(HOST, ["sh", "-c", f"cp -p {SAVED} /etc/motd && printf '%s' \"$1\" >> /etc/motd", "-", note], check=True)
    lab.exec(HOST, "service cron stop >/dev/null 2>&1 || systemctl stop cron.service", check=True)
    assert not lab.health(HOST, ["cron"])["cron"].healthy


def _cron_runs(lab) -> bool:
    return lab.exec(HOST, ["pgrep", "-x", "cron"]).ok


def test_a_service_its_owner_stopped_on_purpose_is_not_started_around_the_note(noted_host, tmp_path):
    lab, inventory = noted_host
    # auto_approve (labs and tests) runs what the policy gates, but not what an owner's note holds:
    # only a person overrides a person's word.
    extra = {"remediate_backend": "llm", "remediate_hosts": HOST, "remediate_canary_size": 0,
             "remediate_max_retries": 1, "remediate_fallback_restart": True, "remediate_auto_approve": True}
    with LLMServer(default={"plan": {"diagnosis": "cron is not running", "commands": ["service cron start"],
                                     "rationale": "start it"}}) as server:
        work = Workspace(tmp_path, inventory, llm_url=server.url)
        _stop_cron_with(lab, NOTE)
        held = work.run(extravars=extra)
        sent = "\n".join(str(r.get("body")) for r in server.requests)
        assert not _cron_runs(lab), "cron was started around its owner's note"
        assert not lab.health(HOST, ["cron"])["cron"].healthy
        outcome = held.outcomes()[(HOST, "cron")]
        assert outcome["state"] in ("waiting_approval", "escalated"), outcome
        assert outcome["planned"] and all(p["verdict"] != "allow" for p in outcome["planned"]), outcome
        # the approver is told why: the note's own line, in what the run wrote for the human
        pending = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "artifacts" / "pending").glob("*.json"))
        assert "owner's note: /etc/motd says `cron is stopped on this host ON PURPOSE" in pending, pending[-2000:]
        assert "ON PURPOSE until the close is signed off" in sent, "the model was not shown the note"

        # The same stop with a note that only speaks of cron: nothing holds it, the run starts it.
        _stop_cron_with(lab, PLAIN)
        started = work.run(extravars=extra)
        assert started.outcomes()[(HOST, "cron")]["state"] == "healed", started.outcomes()[(HOST, "cron")]
        assert _cron_runs(lab) and lab.health(HOST, ["cron"])["cron"].healthy
