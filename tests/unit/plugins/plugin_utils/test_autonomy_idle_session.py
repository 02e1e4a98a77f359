"""The autonomy table's ``end_idle_transaction`` (issue 27): one database session ended by its PID
without a human only when the incident's evidence shows it idle in its transaction for the
policy's ``idle_transaction_seconds`` while other sessions wait on its lock; every other session
end keeps its approval, and the host is told what to check again before it runs."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy, policy

APP = {"name": "sentinel-app", "units": ["sentinel-app"], "processes": ["sentinel-app"],
       "depends_on": ["postgresql"], "config_paths": ["/etc/sentinel-app"]}
END = "runuser -u postgres -- psql -X -At -d sentinelapp -c 'SELECT pg_terminate_backend({pid})'"


def blocker(**changes) -> dict:
    row = {"pid": 247, "state": "idle in transaction", "state_s": 4000, "transaction_s": 4000, "blocks": 6,
           "identity": "1764350000.5/1764350001.25"}
    row.update(changes)
    return row


def decide(command: str, rows: list, table=None, idle_seconds=None):
    loaded = policy.load_policy(None)
    scope = policy.scope_from_service(APP, [], {})
    [verdict] = policy.classify_many([command], loaded, scope=scope)
    evidence = {"degraded": "sentinel-app is degraded", "blocking_sessions": {"postgresql": rows}}
    [out] = autonomy.apply([verdict], loaded["autonomy"] if table is None else table, evidence=evidence,
                           definition=APP, idle_seconds=loaded["idle_transaction_seconds"]
                           if idle_seconds is None else idle_seconds)
    return verdict, out, evidence


def test_a_session_idle_in_its_transaction_past_the_limit_and_blocking_others_is_ended_alone():
    before, out, evidence = decide(END.format(pid=247), [blocker()])
    assert before["verdict"] == "approval"
    assert out["verdict"] == "allow" and out["autonomy"] == ["end_idle_transaction"]
    # the host is told exactly which session, in which transaction, and how long it must be idle
    assert autonomy.session_check(out, evidence) == {
        "dependency": "postgresql", "pid": 247, "identity": "1764350000.5/1764350001.25", "min_idle": 600}


@pytest.mark.parametrize("rows, pid", [
    ([blocker(state_s=57, transaction_s=57)], 247),        # a person may be at work in psql
    ([blocker(state="active")], 247),                       # it runs a statement: busy, not abandoned
    ([blocker(blocks=0)], 247),                             # nobody waits on it
    ([blocker()], 248),                                     # not the session the evidence shows
    ([blocker(identity="")], 247),                          # cannot be told from a later session
    ([], 247),
])
def test_any_other_session_end_keeps_its_approval(rows, pid):
    _before, out, evidence = decide(END.format(pid=pid), rows)
    assert out["verdict"] == "approval" and out["autonomy"] == ["unclassed"]


def test_a_query_that_picks_its_sessions_itself_is_never_ended_alone():
    command = ("runuser -u postgres -- psql -c \"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
               "WHERE state = 'idle in transaction'\"")
    _before, out, _evidence = decide(command, [blocker()])
    assert out["verdict"] == "approval"


def test_the_operator_owns_the_class_and_the_limit():
    table = dict(policy.load_policy(None)["autonomy"], end_idle_transaction="human")
    assert decide(END.format(pid=247), [blocker()], table=table)[1]["verdict"] == "approval"
    _before, out, evidence = decide(END.format(pid=247), [blocker(state_s=57)], idle_seconds=30)
    assert out["verdict"] == "allow" and autonomy.session_check(out, evidence)["min_idle"] == 30
    loaded = policy.load_policy({"idle_transaction_seconds": 30})
    assert loaded["idle_transaction_seconds"] == 30
    with pytest.raises(policy.PolicyError, match="idle_transaction_seconds"):
        policy.load_policy({"idle_transaction_seconds": 0})


def test_an_approved_session_end_is_still_checked_to_be_the_same_session():
    """A command a human approved (or the policy allowed outright) carries the session's identity
    only: the host runs it while the PID is still that session, whatever its state now."""
    loaded = policy.load_policy(None)
    [verdict] = policy.classify_many([END.format(pid=247)], loaded, scope=policy.scope_from_service(APP, [], {}))
    evidence = {"blocking_sessions": {"postgresql": [blocker(state_s=5)]}}
    assert autonomy.session_check(verdict, evidence) == {
        "dependency": "postgresql", "pid": 247, "identity": "1764350000.5/1764350001.25"}
    assert autonomy.session_check(verdict, {}) == {}
