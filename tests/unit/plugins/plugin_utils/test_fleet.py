"""Unit tests for plugins/plugin_utils/fleet.py (fleet plans made right per host)."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import fleet


def evidence(pid, name="python3"):
    return {"listeners": f"0.0.0.0:80 held by {name} (pid {pid})"}


def verdict(command):
    return {"command": command, "verdict": "allow", "reasons": [], "argv": command.split(), "source": "runbook"}


def test_pid_of_the_representative_is_mapped():
    out = fleet.localize([verdict("kill 310"), verdict("service nginx start")], evidence(310), evidence(4242),
                         "nginx", [80])
    assert [c["command"] for c in out] == ["kill 4242", "service nginx start"]
    assert out[0]["localized_from"] == "kill 310" and "localized_from" not in out[1]


def test_same_host_is_unchanged():
    out = fleet.localize([verdict("kill 310")], evidence(310), evidence(310), "nginx", [80])
    assert out[0]["command"] == "kill 310" and "localized_from" not in out[0]


def test_host_without_counterpart_refuses():
    out = fleet.localize([verdict("kill 310")], evidence(310), {"listeners": ""}, "nginx", [80])
    assert out[0]["verdict"] == "reject" and out[0]["argv"] is None
    assert "this host has none" in out[0]["reasons"][-1]


def test_placeholders_are_filled_from_this_host():
    out = fleet.localize(["kill {port_owner_pid:80}"], {}, evidence(77), "nginx", [80])
    assert out[0]["command"] == "kill 77"
    bad = fleet.localize(["kill {port_owner_pid:80}"], {}, {}, "nginx", [80])
    assert bad[0]["verdict"] == "reject"


def test_generalize_for_memory():
    out = fleet.generalize([{"command": "kill 310", "rc": 0}, {"command": "kill 3100"}], evidence(310), "nginx", [80])
    assert [c["command"] for c in out] == ["kill {port_owner_pid:80}", "kill 3100"]
    assert out[0]["rc"] == 0
