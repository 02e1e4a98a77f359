# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A program reached through a link to a dispatcher script (Debian's pg_wrapper behind psql)
may exec the versioned program of its own name, which the dispatcher runs."""
from __future__ import annotations

import os

from ansible_collections.sentinel.remediation.plugins.module_utils import landlock


def _script(path, text="#!/bin/sh\nexit 0\n"):
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_link_to_a_dispatcher_may_exec_the_versioned_program_of_its_name(tmp_path, monkeypatch):
    wrapper = _script(tmp_path / "pg_wrapper")
    (tmp_path / "lib" / "15" / "bin").mkdir(parents=True)
    real = _script(tmp_path / "lib" / "15" / "bin" / "psql")
    link = tmp_path / "psql"
    os.symlink(wrapper, link)
    asked = []

    def found(pattern):
        asked.append(pattern)
        return [str(real)] if pattern.endswith("/*/bin/psql") else []
    monkeypatch.setattr(landlock.glob, "glob", found)
    allowed = landlock.executables(str(link))
    assert str(wrapper) in allowed and str(real) in allowed and os.path.realpath("/bin/sh") in allowed
    assert asked == ["/usr/lib/*/*/bin/psql", "/usr/lib/*/bin/psql"]


def test_a_program_that_is_what_its_name_says_gets_nothing_more(tmp_path, monkeypatch):
    program = _script(tmp_path / "psql")
    monkeypatch.setattr(landlock.glob, "glob", lambda pattern: ["/usr/lib/postgresql/15/bin/psql"])
    assert "/usr/lib/postgresql/15/bin/psql" not in landlock.executables(str(program))
