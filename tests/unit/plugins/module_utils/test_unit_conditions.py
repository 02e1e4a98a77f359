# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A unit's path conditions, read from its files as systemd reads them, each with its path's state now."""
from __future__ import annotations

import subprocess

from ansible_collections.sentinel.remediation.plugins.module_utils import unit_conditions


def test_only_the_path_conditions_of_the_unit_section_are_read() -> None:
    text = ("[Unit]\nDescription=x\n# ConditionPathExists=!/commented\nConditionPathExists=!/var/lib/x/LOCK\n"
            "AssertFileNotEmpty=/etc/x.conf\nConditionVirtualization=!container\n"
            "[Service]\nConditionPathExists=/not/in/unit/section\n")
    assert unit_conditions.parse(text, "f") == [("ConditionPathExists", "!/var/lib/x/LOCK", "f"),
                                                ("AssertFileNotEmpty", "/etc/x.conf", "f")]


def test_an_empty_assignment_in_a_drop_in_resets_the_conditions_before_it(tmp_path) -> None:
    fragment = tmp_path / "x.service"
    fragment.write_text("[Unit]\nConditionPathExists=/etc/x/enabled\n")
    drop_in = tmp_path / "10-guard.conf"
    drop_in.write_text("[Unit]\nConditionPathExists=\nConditionPathExists=!/run/x.guard\n")
    props = {"FragmentPath": str(fragment), "DropInPaths": str(drop_in)}
    assert unit_conditions.conditions_of(props) == [("ConditionPathExists", "!/run/x.guard", str(drop_in))]


def test_negated_and_triggering_conditions_are_evaluated_as_systemd_does(tmp_path) -> None:
    there = tmp_path / "there"
    there.write_text("")
    assert unit_conditions.evaluate("ConditionPathExists", "!" + str(there)) == (str(there), False)
    assert unit_conditions.evaluate("ConditionPathExists", "|!" + str(tmp_path / "absent")) == (
        str(tmp_path / "absent"), True)
    assert unit_conditions.evaluate("AssertFileNotEmpty", str(there)) == (str(there), False)
    assert unit_conditions.evaluate("ConditionPathIsReadWrite", str(there))[1] is None


def test_an_unmet_guard_says_its_path_state_and_that_its_writer_is_gone(tmp_path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    marker = tmp_path / "RESTORE_IN_PROGRESS"
    marker.write_text(f"pgrestore-drill pid {gone.pid} started: restoring backup into 15/main\n")
    drop_in = tmp_path / "10-restore-guard.conf"
    drop_in.write_text(f"[Unit]\nConditionPathExists=!{marker}\nConditionPathExists=/\n")
    described = unit_conditions.describe({"DropInPaths": str(drop_in)})
    keys = list(described)
    assert keys[0] == f"ConditionPathExists=!{marker}"      # the unmet one first
    text = described[keys[0]]
    assert text.startswith(f"NOT met now: {marker} exists (file, ")
    assert f"writer gone: pid {gone.pid} is not running" in text
    assert text.endswith(f"(set in {drop_in})")
    assert described["ConditionPathExists=/"].startswith("met now: / exists (directory")


def test_a_met_guard_says_its_path_is_absent(tmp_path) -> None:
    drop_in = tmp_path / "g.conf"
    drop_in.write_text(f"[Unit]\nConditionPathExists=!{tmp_path}/FROZEN\n")
    assert unit_conditions.describe({"DropInPaths": str(drop_in)}) == {
        f"ConditionPathExists=!{tmp_path}/FROZEN": f"met now: {tmp_path}/FROZEN is absent (set in {drop_in})"}


def test_unit_name_specifiers_are_expanded_before_the_path_is_judged(tmp_path) -> None:
    unit = "postgresql@15-main.service"
    assert unit_conditions.expand_specifiers("/etc/postgresql/%I/postgresql.conf", unit) == \
        "/etc/postgresql/15/main/postgresql.conf"
    assert unit_conditions.expand_specifiers("/run/%p/%i.%%", unit) == "/run/postgresql/15-main.%"
    assert unit_conditions.expand_specifiers("/home/%u/x", unit) is None   # a user value: not read here
    assert unit_conditions.evaluate("AssertPathExists", "/home/%u/x", unit) == ("/home/%u/x", None)
    fragment = tmp_path / "x@.service"
    (tmp_path / "a").mkdir()
    fragment.write_text(f"[Unit]\nAssertPathExists={tmp_path}/%i\n")
    described = unit_conditions.describe({"FragmentPath": str(fragment)}, unit="x@a.service")
    assert described == {f"AssertPathExists={tmp_path}/%i": f"met now: {tmp_path}/a exists (directory, "
                         + described[f"AssertPathExists={tmp_path}/%i"].split("(directory, ", 1)[1]}
