"""The fleet-wide stop: a check failing on most of the fleet at once is suspect, not every host."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import fleet_stop


def health(*rows) -> dict:
    return {"changed": False, "health": {"services": [dict(r) for r in rows]}}


def up(name):
    return {"name": name, "healthy": True}


def down(name, error="connection refused"):
    return {"name": name, "healthy": False, "error": error}


def fleet(failing: int, total: int, service="nginx") -> dict:
    return {f"web{i:02d}": health(down(service) if i < failing else up(service), up("cron")) for i in range(total)}


def test_more_than_the_share_failing_stops_that_check_only():
    decision = fleet_stop.decide(fleet(4, 6), 0.5, 5)
    assert list(decision["stopped"]) == ["nginx"] and decision["checked"] == 6
    stop = decision["stopped"]["nginx"]
    assert stop["hosts"] == ["web00", "web01", "web02", "web03"] and stop["checked"] == 6
    assert stop["reason"].startswith("fleet-wide stop: the nginx check fails on 4 of 6 checked hosts at once "
                                     "(web00, web01, web02, web03), more than 50% of them")
    assert "'connection refused' (4 of 4)" in stop["reason"]
    assert decision["services"]["cron"] == {"checked": [f"web{i:02d}" for i in range(6)], "failing": [], "stopped": False}


def test_exactly_the_share_or_below_is_healed_host_by_host():
    assert fleet_stop.decide(fleet(3, 6), 0.5, 5)["stopped"] == {}
    assert fleet_stop.decide(fleet(1, 6), 0.5, 5)["stopped"] == {}


def test_a_play_smaller_than_the_minimum_is_never_the_fleet():
    assert fleet_stop.decide(fleet(4, 4), 0.5, 5)["stopped"] == {}
    assert list(fleet_stop.decide(fleet(3, 3), 0.5, 3)["stopped"]) == ["nginx"]


def test_share_one_turns_the_stop_off():
    assert fleet_stop.decide(fleet(10, 10), 1, 2)["stopped"] == {}


def test_hosts_without_a_result_are_not_counted():
    results = fleet(3, 5)
    results["web04"] = {"unreachable": True, "msg": "gone"}
    results["web05"] = {"skipped": True}
    decision = fleet_stop.decide(results, 0.5, 5)
    assert decision["checked"] == 4 and decision["stopped"] == {}  # 4 checked hosts: under the minimum


def test_a_degraded_row_fails_the_check_too():
    results = fleet(2, 5)
    results["web04"] = health({"name": "nginx", "healthy": False, "degraded": True, "error": "timed out"})
    assert fleet_stop.decide(results, 0.5, 5)["stopped"]["nginx"]["hosts"] == ["web00", "web01", "web04"]


@pytest.mark.parametrize("share, hosts, word", [(0, 5, "share"), (1.5, 5, "share"), ("half", 5, "share"),
                                                (0.5, 1, "min_hosts"), (0.5, "x", "min_hosts"), (0.5, 2.5, "min_hosts")])
def test_bad_settings_are_named(share, hosts, word):
    with pytest.raises(fleet_stop.FleetStopError, match=f"remediate_fleet_stop_{word}"):
        fleet_stop.decide({}, share, hosts)


def test_only_the_first_listed_host_notifies():
    stop = fleet_stop.decide(fleet(4, 6), 0.5, 5)["stopped"]["nginx"]
    first = fleet_stop.stop_outcome("nginx", "web00", stop, {"attempts": 0})
    other = fleet_stop.stop_outcome("nginx", "web02", stop, {"attempts": 0})
    assert first["state"] == other["state"] == "escalated" and first["safeguards"] == ["fleet_stop"]
    assert "repeat_notice" not in first and other["repeat_notice"] is True
    record = fleet_stop.journal_record("r1", "web02", "nginx", stop)
    assert record["kind"] == "fleet_stop" and record["hosts"] == stop["hosts"] and record["checked"] == 6
