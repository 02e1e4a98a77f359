# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""confinement.derive: the Landlock rules of a command come from the policy's own verdict."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils import confinement
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify

CORPORA = Path(__file__).resolve().parents[3] / "corpora" / "policy"


def derived(command: str) -> dict:
    verdict = classify(command)
    assert verdict["verdict"] != "reject", verdict["reasons"]
    return confinement.derive(verdict)


def test_a_deletion_may_remove_entries_of_the_declared_directory_only() -> None:
    confine = derived("rm -f /run/nginx.pid")
    assert confine["remove"] == ["/run"] and confine["write"] == [] and confine["create"] == []
    assert confine["exec"] == ["rm"] and confine["tcp"] is False


def test_an_in_place_write_grants_the_file_alone() -> None:
    confine = derived("truncate -s 0 /var/log/nginx/error.log")
    assert (confine["write"], confine["create"], confine["remove"]) == (["/var/log/nginx/error.log"], [], [])


def test_sed_in_place_may_make_its_temporary_file_beside_the_file_it_edits() -> None:
    confine = derived("sed -i s/8080/80/ /etc/nginx/sites-available/default")
    assert confine["write"] == ["/etc/nginx/sites-available/default"]
    assert confine["create"] == ["/etc/nginx/sites-available"] == confine["remove"]


def test_a_creation_is_allowed_in_the_declared_parent_and_a_move_on_both_sides() -> None:
    assert derived("mkdir -p /var/log/nginx")["create"] == ["/var/log"]
    moved = derived("mv /etc/nginx/conf.d/a.conf /etc/nginx/conf.d/a.conf.disabled")
    assert moved["create"] == ["/etc/nginx/conf.d"] == moved["remove"]


def test_a_read_grants_no_change_and_a_shell_is_never_among_the_programs() -> None:
    confine = derived("sed -n p /etc/hostname")
    assert (confine["write"], confine["create"], confine["remove"], confine["exec"]) == ([], [], [], ["sed"])


def test_owner_and_mode_changes_need_no_file_right() -> None:
    confine = derived("chown redis:redis /var/lib/redis")
    assert (confine["write"], confine["create"], confine["remove"]) == ([], [], [])


def test_wrappers_and_runuser_are_programs_of_the_command_too() -> None:
    assert derived("timeout 5 systemctl restart nginx")["exec"] == ["timeout", "systemctl"]
    assert derived('runuser -u postgres -- psql -c "select 1"')["exec"] == ["runuser", "psql"]


@pytest.mark.parametrize("command", ["curl -sS http://127.0.0.1/", "redis-cli ping", 'psql -c "select 1"'])
def test_clients_of_a_server_keep_tcp(command: str) -> None:
    assert derived(command)["tcp"] is True


@pytest.mark.parametrize("command", ["kill 4242", "systemctl restart nginx", "nginx -t", "rm -f /run/nginx.pid"])
def test_everything_else_gets_no_tcp(command: str) -> None:
    assert derived(command)["tcp"] is False


def test_systemctl_is_confined_because_the_service_manager_starts_the_daemon() -> None:
    confine = derived("systemctl start nginx")
    assert not confine.get("exception") and confine["exec"] == ["systemctl"]


@pytest.mark.parametrize("command", ["service nginx start", "/etc/init.d/nginx restart", "pg_ctlcluster 15 main start"])
def test_tools_that_start_daemons_in_their_own_tree_are_the_declared_exception(command: str) -> None:
    confine = derived(command)
    assert "service control" in confine["exception"] and "write" not in confine


def test_tools_that_run_programs_their_data_names_cannot_be_confined() -> None:
    confine = confinement.derive(classify("logrotate -vf /etc/logrotate.d/nginx"))
    assert "runs programs" in confine["unconfinable"]


def test_an_unknown_change_verb_makes_the_command_unconfinable_not_silently_allowed() -> None:
    confine = confinement.derive({"argv": ["frob", "/etc/x"], "effects": ["frobnicates /etc/x"]})
    assert "frobnicates /etc/x" in confine["unconfinable"]


def test_a_refused_verdict_has_no_confinement() -> None:
    assert confinement.derive(classify("rm -rf /")) is None


def test_the_rules_in_words_name_every_grant() -> None:
    words = derived("mv /etc/nginx/conf.d/a.conf /etc/nginx/conf.d/a.conf.disabled")["rules"]
    assert words == "exec only mv; changes only: create in /etc/nginx/conf.d, remove in /etc/nginx/conf.d; no TCP"


def test_every_path_effect_of_the_policy_corpora_is_understood() -> None:
    """A new effect wording in the policy must be placed here (change or no grant), or the
    commands using it would all need approval."""
    unknown = set()
    for path in sorted(CORPORA.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in (data.get("legitimate") or []) + (data.get("harmful") or []) if isinstance(data, dict) else []:
            verdict = classify(entry["command"])
            if verdict["verdict"] != "reject" and not (confinement.derive(verdict) or {}).get("unconfinable"):
                unknown.update(confinement.unknown_path_effects(verdict["effects"]))
    assert not unknown


def test_a_plan_that_cannot_be_confined_waits_for_a_human_or_is_refused() -> None:
    plan = [classify("rm -f /run/nginx.pid"), classify("service nginx start")]
    assert confinement.gate(plan, "preferred", 7) == ("", "")
    held, note = confinement.gate(plan, "preferred", 0)
    assert held == "approval" and "`rm -f /run/nginx.pid`: this host's kernel cannot confine" in note
    assert "service nginx start" not in note  # the declared exception needs no ruleset anywhere
    held, note = confinement.gate(plan, "required", 0)
    assert held == "escalate" and note.startswith("refused: confinement is required")
    assert confinement.gate(plan, "off", 0) == ("", "")
    # an unknown kernel is left to the runner, which applies the same rule
    assert confinement.gate(plan, "preferred", None) == ("", "")
    rotate = [classify("logrotate -vf /etc/logrotate.d/nginx")]
    assert confinement.gate(rotate, "preferred", 7)[0] == "approval"


def test_a_configuration_test_may_open_the_logs_and_pid_file_its_configuration_names() -> None:
    confine = derived("nginx -t")
    assert confine["create"] == ["/var/log", "/run"] and confine["write"] == [] and confine["remove"] == []


def test_a_change_declared_without_its_paths_cannot_be_confined() -> None:
    verdict = {"argv": ["ssh-keygen", "-A"], "effects": ["creates the host's missing SSH host keys"]}
    assert "without naming the paths" in confinement.derive(verdict)["unconfinable"]


def test_a_confinement_denial_is_recorded_and_escalates_as_a_policy_event() -> None:
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal

    attempt = engine.Attempt(number=1, gate="execute", commands=[engine.CommandRun(command="sed -n p /etc/hostname")])
    result = {"rc": 4, "stderr": "sed: couldn't open temporary file /etc/sedX: Permission denied", "confined": True,
              "confinement": "Landlock ABI 7; exec only /usr/bin/sed", "denied": "sed: couldn't open temporary file "
              "/etc/sedX: Permission denied"}
    engine.record_results(attempt, [result])
    why = engine.confinement_event(attempt)
    assert "/etc/sedX: Permission denied" in why and "not retried" in why
    incident = engine.Incident(host="lab01", service="nginx", state="escalated", reason=why, attempts=[attempt])
    assert engine.escalation_kind(incident) == "refused"
    shown = engine.outcome(incident)["commands"][0]
    assert shown["confinement"].startswith("Landlock ABI 7") and "Permission denied" in shown["denied"]
    record = journal.result("run", "nginx", 1, [result], False, "still failing")["results"][0]
    assert record == {"rc": 4, "skipped": False, "confined": True, "confinement": result["confinement"],
                      "denied": result["denied"]}


def test_a_package_query_is_confined_and_an_install_is_not() -> None:
    assert derived("dpkg -s postgresql-15-cron")["exec"] == ["dpkg"]
    verdict = classify("apt-get install -y nginx")
    assert verdict["argv"] and "without naming the paths" in confinement.derive(verdict)["unconfinable"]


def test_a_config_test_may_bind_and_touch_logs_and_pid_files_but_never_connect() -> None:
    # nginx -t opens /run/nginx.pid for writing and binds its listen sockets to test them.
    confine = confinement.derive(classify("nginx -t"))
    assert confine["bind"] is True and confine["tcp"] is False
    assert "/run" in confine["create"] and "/var/log" in confine["create"]
    assert "/etc" not in confine["create"] and not confine["write"]
    assert "TCP bind only" in confine["rules"]
