# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The evidence budget keeps what the failure names, whole, and says what it left out."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import evidence_budget
from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import build_messages, render_evidence

CAUSE = "max_connections = 0"


def _settings(count: int) -> str:
    lines = [f"setting_{n} = {n}  # a line of the file that does not matter here" for n in range(count)]
    lines.insert(count * 2 // 3, CAUSE)
    return "\n".join(lines)


def test_failure_terms_are_the_places_paths_and_quoted_words_of_the_error_and_config_test():
    terms = evidence_budget.failure_terms(
        'FATAL: invalid value for parameter "max_connections": 0 in /etc/postgresql/15/main/postgresql.conf:64',
        {"config_test": "", "config_context": [{"file": "/etc/app.conf", "line": 3}]})
    assert terms[:2] == ["/etc/postgresql/15/main/postgresql.conf:64", "/etc/postgresql/15/main/postgresql.conf"]
    assert "max_connections" in terms and "/etc/app.conf:3" in terms
    assert "/etc" not in terms


def test_a_cut_item_keeps_the_line_the_failure_names_whole():
    text = _settings(200)
    cut = evidence_budget.fit_lines(text, 1200, ["max_connections"])
    assert len(cut) <= 1200
    assert CAUSE in cut.splitlines()
    # every line kept is a whole line of the original, and each gap says how much it holds
    original = set(text.splitlines())
    for line in cut.splitlines():
        assert line in original or (line.startswith("[... ") and line.endswith(" chars cut ...]")), line


def test_logs_keep_their_newest_lines_when_nothing_is_named():
    log = "\n".join(f"line {n}" for n in range(500))
    cut = evidence_budget.fit_lines(log, 300, [], keep="tail")
    assert cut.splitlines()[-1] == "line 499" and cut.splitlines()[0].startswith("[... ")


def test_one_line_longer_than_the_budget_is_cut_and_says_so():
    cut = evidence_budget.fit_lines("x" * 5000, 400, [])
    assert len(cut) <= 400 and cut.endswith("chars cut]")


def test_items_naming_the_failure_go_first_and_what_does_not_fit_is_listed_with_how_to_ask():
    items = [("journal", "\n".join(f"noise {n} " + "z" * 70 for n in range(80))),
             ("processes", "PID PPID USER STATE STARTED PORTS CMD\n" + "\n".join(
                 f"{n} 1 root S 06:00 - worker {n} " + "w" * 60 for n in range(80))),
             ("recent_changes", "[/etc/postgresql/15/main/postgresql.conf]\n" + _settings(40))]
    text = evidence_budget.render(items, 2500, 1600, ["/etc/postgresql/15/main/postgresql.conf", "max_connections"],
                                  service="postgresql", init="systemd")
    assert text.startswith("### recent_changes\n")
    assert CAUSE in text.splitlines()
    assert "### left out for size" in text
    assert "- processes (" in text and "`ps -eo pid,ppid,user,stat,lstart,args`" in text
    assert "- journal (" in text and "`journalctl -u postgresql -n 50 --no-pager`" in text
    # a listed item is left out whole, not cut in the middle
    assert "### processes" not in text


def test_the_prompt_keeps_the_named_config_line_of_a_large_changed_file():
    evidence = {"status": "postgresql@15-main.service is failed/failed (result exit-code)",
                "journal": "\n".join(f"Nov 28 06:0{n % 10} host postgres[1]: LOG: noise {n} " + "q" * 60
                                     for n in range(120)),
                "recent_changes": {"/etc/postgresql/15/main/postgresql.conf": _settings(300)}}
    error = 'invalid value for parameter "max_connections": "0" in /etc/postgresql/15/main/postgresql.conf'
    text = render_evidence(evidence, error=error, service="postgresql")
    assert CAUSE in text.splitlines()
    assert len(text) < 6000 + 600
    user = build_messages(service="postgresql", error=error, evidence=evidence, max_commands=3,
                          now="2026-11-28T06:30:00Z")[1]["content"]
    assert "Now (UTC): 2026-11-28T06:30:00Z" in user and CAUSE in user


def test_data_markers_left_out_say_how_to_list_the_directory():
    assert evidence_budget.ask_for("data_markers", "postgresql") == "`stat PATH` or `ls -la DIR`"


def test_the_files_that_drifted_are_terms_after_what_the_failure_names():
    evidence = {"config_test": "rc 0", "known_good": {"drift": [
        {"path": "/etc/nginx/sites-available/default", "same_file": ["/etc/nginx/sites-enabled/default"]},
        {"path": "/etc/nginx/snippets/tls-pci.conf", "change": "new"}]}}
    assert evidence_budget.failure_terms("GET https://127.0.0.1/ failed: handshake failure in /srv/x", evidence) == [
        "/srv/x", "/etc/nginx/sites-available/default", "/etc/nginx/sites-enabled/default",
        "/etc/nginx/snippets/tls-pci.conf"]
    # a TLS failure names no file: what the host says of the drifted files outranks a long unit dump
    items = [("unit", "\n".join(f"Property{i}: value" for i in range(60))),
             ("ownership", "/etc/nginx/snippets/tls-pci.conf: says: line 1: # SEC-2207 profile")]
    text = evidence_budget.render(items, 900, 800, evidence_budget.failure_terms("handshake failure", evidence))
    assert text.startswith("### ownership\n/etc/nginx/snippets/tls-pci.conf: says") and "### unit" in text
    assert evidence_budget.render(items, 900, 800, evidence_budget.failure_terms("handshake failure", {})).startswith("### unit")


def test_the_owner_s_note_goes_first_whatever_else_is_named():
    items = [("config_test", "error in /etc/x.conf:3"), ("operator_notes", "/etc/motd: cron is stopped ON PURPOSE")]
    text = evidence_budget.render(items, 2000, 800, ["/etc/x.conf:3"], always=("operator_notes",))
    assert text.startswith("### operator_notes\n")


def test_the_scheduled_jobs_acting_on_the_service_are_never_left_out_for_size():
    """A clean-up job's lines name /run, never the socket the failure names: ranked by the
    failure's words they would come last and go first when the request is full."""
    jobs = {"/etc/cron.d/clean-stale-runtime": "changed 2026-11-29T19:29:34Z\n2: 10 4 * * * root /usr/local/sbin/clean"
                                               "\n  /usr/local/sbin/clean:4: find /tmp /run -mtime +7 -delete"}
    evidence = {"scheduled_jobs": jobs, "status": "online\n" * 40,
                "named_paths": {"/var/run/postgresql/.s.PGSQL.5432": {"type": "missing", "note": "x" * 3000}},
                "logs": {"/var/log/postgresql/postgresql-15-main.log": "LOG: /var/run/postgresql/.s.PGSQL.5432\n" * 80}}
    text = render_evidence(evidence, budget=2500, item_budget=1200,
                           error="no such file /var/run/postgresql/.s.PGSQL.5432", service="postgresql")
    assert "### scheduled_jobs" in text and "find /tmp /run -mtime +7 -delete" in text
    assert "left out for size" in text  # the request was full: something else went
