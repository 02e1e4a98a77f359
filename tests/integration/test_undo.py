"""Undo on the lab: an attempt that did not heal leaves nothing behind, and an operator can put
back what a healed incident changed. Everything is asserted from inside the container (bytes,
mode, owner, link target), never from what the collection says it did."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lab_scene import forget_known_good
from llm_server import LLMServer
from workflow_support import REPO, Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"
PROBE = "/etc/nginx/conf.d/undo-probe.conf"
ASIDE = "/etc/nginx/conf.d/undo-aside.conf"
MOVED_TO = "/etc/nginx/undo-aside.conf.bak"
MADE = "/etc/nginx/undo-made"
LINK = "/etc/nginx/undo-link"
WATCHED = [PROBE, ASIDE, MOVED_TO, MADE, LINK]
# What each watched path is, read in the container: kind, mode, owner, group, link target, sha256.
STATE = r"""
for p in "$@"; do
  if [ -L "$p" ] || [ -e "$p" ]; then
    printf '%s|%s|%s|' "$p" "$(stat -c '%F %a %U %G' "$p")" "$(readlink "$p")"
    if [ -f "$p" ] && [ ! -L "$p" ]; then sha256sum "$p" | cut -d' ' -f1; else echo; fi
  else
    echo "$p|absent"
  fi
done
"""
SETUP = f"""
rm -rf {MADE} {MOVED_TO} {LINK}
printf '# sentinel_undo_marker_a\\n' > {PROBE} && chown www-data:adm {PROBE} && chmod 604 {PROBE}
printf '# set aside by no one\\n' > {ASIDE} && chmod 640 {ASIDE}
ln -s /etc/nginx/nginx.conf {LINK}
"""


def plan(*commands: str) -> dict:
    return {"plan": {"diagnosis": "scripted", "commands": list(commands), "rationale": "scripted"}}


def states(lab) -> list[str]:
    found = lab.exec(HOST, ["sh", "-c", STATE, "state", *WATCHED], check=True).stdout
    return found.splitlines()


@pytest.fixture
def nginx_host(lab, lab_inventory):
    require_docker()
    # No baseline from another module's healthy pass: the probes made here would be drift from it,
    # and the known-good restore would take them out before the scripted attempt runs.
    forget_known_good(lab, HOST)
    lab.exec(HOST, SETUP, check=True)
    yield lab, lab_inventory
    lab.exec(HOST, f"rm -rf {PROBE} {ASIDE} {MADE} {MOVED_TO} {LINK}")
    forget_known_good(lab, HOST)
    if not lab.health(HOST, ["nginx"])["nginx"].healthy:
        lab.reset(HOST)


def _run(work: Workspace, **extra):
    return work.run(extravars={"remediate_backend": "llm", "remediate_hosts": HOST, "remediate_auto_approve": True,
                               "remediate_canary_size": 0, **extra})


def test_an_attempt_that_did_not_heal_leaves_every_path_it_touched_as_it_was(nginx_host, tmp_path):
    lab, inventory = nginx_host
    before = states(lab)
    lab.inject(HOST, "nginx_stopped")
    # Attempt 1 edits a config, moves a file aside and makes a directory, and does not start nginx;
    # attempt 2 starts it.
    first = plan(f"sed -i s/sentinel_undo_marker_a/sentinel_undo_marker_b/ {PROBE}", f"mv {ASIDE} {MOVED_TO}",
                 f"mkdir -p {MADE}")
    with LLMServer(replies=[first, plan("service nginx start")], default=plan("service nginx start")) as server:
        run = _run(Workspace(tmp_path, inventory, llm_url=server.url))
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 2, outcome
    ran = [c for c in outcome["commands"] if c["attempt"] == 1]
    assert [c["rc"] for c in ran] == [0, 0, 0], ran  # attempt 1 really changed the host
    # From inside the container: bytes, mode, owner, group and link target exactly as before.
    assert states(lab) == before
    assert lab.health(HOST, ["nginx"])["nginx"].healthy
    # The report and the journal say what was put back.
    undo = outcome["timeline"][0]["undo"]
    assert undo["rolled_back"] is True and not undo.get("failed"), undo
    assert set(undo["restored"]) == {PROBE, ASIDE, MOVED_TO, MADE}, undo
    diff = next(c["diff"] for c in undo["changed"] if c["path"] == PROBE)
    assert "-# sentinel_undo_marker_a" in diff and "+# sentinel_undo_marker_b" in diff, diff
    records = [json.loads(line) for line in (run.artifacts_dir / "journal" / f"{HOST}.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["kind"] == "undo"]
    assert record["attempt"] == 1 and set(record["restored"]) == set(undo["restored"]), record
    assert "attempt 1: restored" in run.stdout or "restored" in json.dumps(run.report), run.stdout[-2000:]


def _forget_command(facts_dir, host: str, command: str) -> int:
    """Drop ``command`` from every remembered plan in ``host``'s fact cache file (the plain or
    the tagged form ansible-core 2.19 writes); how many were dropped."""
    path = facts_dir / f"s1_{host}"
    raw = json.loads(path.read_text())
    dropped = 0

    def strip(value):
        nonlocal dropped
        if isinstance(value, dict):
            for key, item in list(value.items()):
                inner = item.get("value") if isinstance(item, dict) and "__ansible_type" in item else item
                if key == "commands" and isinstance(inner, list):
                    kept = [c for c in inner if command not in json.dumps(c)]
                    dropped += len(inner) - len(kept)
                    inner[:] = kept
                strip(item)
        elif isinstance(value, list):
            for item in value:
                strip(item)

    if "__payload__" in raw:
        payload = json.loads(raw["__payload__"])
        strip(payload)
        raw["__payload__"] = json.dumps(payload)
    else:
        strip(raw)
    path.write_text(json.dumps(raw))
    return dropped


def test_a_remembered_fix_run_with_the_health_check_that_did_not_heal_is_put_back(nginx_host, tmp_path):
    lab, inventory = nginx_host
    before = states(lab)
    lab.inject(HOST, "nginx_stopped")
    healing = plan(f"sed -i s/sentinel_undo_marker_a/sentinel_undo_marker_b/ {PROBE}", "service nginx start")
    with LLMServer(replies=[healing], default=plan("service nginx start")) as server:
        work = Workspace(tmp_path, inventory, llm_url=server.url)
        first = _run(work)
        assert first.status == "successful", first.stdout[-3000:]
        assert first.outcomes()[(HOST, "nginx")]["state"] == "healed"
        # The same failure again, and the remembered fix no longer heals it: it edits the config
        # but no longer starts nginx (its start is forgotten). It runs inside the health check.
        lab.exec(HOST, SETUP, check=True)
        assert states(lab) == before
        assert _forget_command(work.facts_dir, HOST, "service nginx start") >= 1
        lab.inject(HOST, "nginx_stopped")
        second = _run(work)
    assert second.status == "successful", second.stdout[-3000:]
    outcome = second.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 2, outcome
    ahead = outcome["timeline"][0]
    assert ahead["source"] == "memory", ahead
    # From inside the container: the edit the remembered fix made is gone, byte for byte.
    assert states(lab) == before
    undo = ahead["undo"]
    assert undo["rolled_back"] is True and undo["restored"] == [PROBE], undo
    assert outcome["undo_id"].startswith("nginx-") and undo["incident"] == outcome["undo_id"], outcome


def test_an_operator_undoes_a_healed_incident_after_a_dry_run(nginx_host, tmp_path):
    lab, inventory = nginx_host
    before = states(lab)
    lab.inject(HOST, "nginx_stopped")
    healing = plan(f"chmod 640 {PROBE}", f"mkdir -p {MADE}", "service nginx start")
    with LLMServer(replies=[healing], default=healing) as server:
        work = Workspace(tmp_path, inventory, llm_url=server.url)
        run = _run(work)
    assert run.status == "successful", run.stdout[-3000:]
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healed" and outcome["attempts"] == 1, outcome
    healed = states(lab)
    assert healed != before
    incident = outcome["undo_id"]
    assert incident.startswith("nginx-"), outcome

    dry = work.run("undo.yml", extravars={"undo_host": HOST, "undo_incident": incident})
    assert dry.status == "successful", dry.stdout[-3000:]
    assert states(lab) == healed  # a dry run changes nothing
    assert "would restore" in dry.stdout and "-rw-r-----" not in dry.stdout, dry.stdout[-3000:]

    # The operator's command: sentinel-remediate undo HOST INCIDENT --yes.
    env = dict(os.environ, SENTINEL_STATE_DIR=str(tmp_path / "driver-state"),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "driver-facts"),
               PYTHONPATH=os.pathsep.join([str(REPO / "driver"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    done = subprocess.run([sys.executable, "-m", "sentinel_remediate", "undo", HOST, incident, "--yes",
                           "-i", str(inventory)], env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{PROBE}: restored" in done.stdout and f"{MADE}: restored" in done.stdout, done.stdout
    assert states(lab) == before
    again = work.run("undo.yml", extravars={"undo_host": HOST, "undo_incident": incident, "undo_confirm": True})
    assert again.status == "successful" and states(lab) == before, again.stdout[-3000:]
