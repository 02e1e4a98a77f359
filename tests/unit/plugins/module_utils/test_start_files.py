"""Which environment files a service's start reads, as its init script or unit says."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import start_files


@pytest.mark.parametrize("script, sourced", [
    (". /etc/default/app\n", ["/etc/default/app"]),
    ("source /etc/sysconfig/app\n", ["/etc/sysconfig/app"]),
    ("[ -r /etc/conf.d/app ] && . /etc/conf.d/app\n", ["/etc/conf.d/app"]),
    ("test -f /etc/default/app || exit 0; . /etc/default/app\n", ["/etc/default/app"]),
    ("if [ -r /etc/default/app ]; then . /etc/default/app; fi\n", ["/etc/default/app"]),
    ("if [ -r /etc/default/app ]\nthen\n\t. /etc/default/app\nfi\n", ["/etc/default/app"]),
    # the script's own variables are put in, braced or not, quoted or not
    ("NAME=app\n[ -r /etc/default/$NAME ] && . /etc/default/$NAME\n", ["/etc/default/app"]),
    ('CONF="/etc/sysconfig/${NAME:-x}"\n. "$CONF"\n', []),
    ("DIR='/etc/app'\nsource \"${DIR}/env\"\n", ["/etc/app/env"]),
    # a variable the script never sets, a command substitution or a glob says no path
    (". $UNKNOWN/app\n", []),
    (". $(dirname $0)/functions\n", []),
    (". /etc/app/*.env\n", []),
    # a comment, a word that merely contains a dot, a relative path
    ("# . /etc/default/commented\n", []),
    ("./configure\ncp a.b /tmp\n", []),
    (". functions\n", []),
])
def test_the_files_a_script_sources(script: str, sourced: list[str]) -> None:
    assert start_files.sourced_files(script) == sourced


def test_only_the_environment_under_etc_counts_not_the_shell_libraries(tmp_path: Path) -> None:
    scripts = tmp_path / "init.d"
    scripts.mkdir()
    (scripts / "redis-server").write_text(
        "#!/bin/sh\nNAME=redis-server\nif [ -r /etc/default/$NAME ]\nthen\n\t. /etc/default/$NAME\nfi\n"
        ". /lib/lsb/init-functions\n. /usr/share/x/init.d-functions\n")
    (scripts / "other").write_text(". /etc/sysconfig/other\n")
    defn = {"name": "redis-server", "units": ["redis-server.service"]}
    assert start_files.sysv_environment_files(defn, str(scripts)) == ["/etc/default/redis-server"]
    # an init script found by a unit's name too; none at all says none
    assert start_files.sysv_environment_files({"name": "x", "units": ["other.service"]}, str(scripts)) == \
        ["/etc/sysconfig/other"]
    assert start_files.sysv_environment_files({"name": "absent", "units": []}, str(scripts)) is None


@pytest.mark.parametrize("value, parsed", [
    ("/etc/default/ssh (ignore_errors=yes)", ("/etc/default/ssh", True)),
    ("/etc/app/env (ignore_errors=no)", ("/etc/app/env", False)),
    ("-/etc/app/env", ("/etc/app/env", True)),
    ("/etc/app/env", ("/etc/app/env", False)),
])
def test_a_units_environment_file_and_whether_it_is_optional(value: str, parsed: tuple) -> None:
    assert start_files.systemd_environment_file(value) == parsed
