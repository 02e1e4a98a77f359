"""Two sections of the evidence: the environment files the host says the start reads (for the
policy's scope) and the small files at the top of the service's data directories."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import (
    host_probe,
    service_evidence,
    service_spec,
    start_files,
)


@pytest.fixture()
def sysv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_systemd: Path) -> Path:  # pylint: disable=unused-argument
    """A SysV-looking host (``no_systemd``) whose init scripts live in tmp_path/init.d."""
    scripts = tmp_path / "init.d"
    scripts.mkdir()
    monkeypatch.setattr(service_evidence, "INIT_SCRIPTS", str(scripts))
    return tmp_path


def _collect(defn: dict, **kw) -> dict:
    return service_evidence.collect(service_spec.resolve(defn), timeout=10, log_lines=5, **kw)


def test_the_environment_files_an_init_script_sources_are_listed_for_the_engine(sysv: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    env = sysv / "etc" / "sysconfig"
    env.mkdir(parents=True)
    (env / "app").write_text("APP_OPTS='--fast'\nAPP_TOKEN=s3cr3t-value-here\n")
    # what the script sources from under the host's configuration root counts; its shell library does not
    monkeypatch.setattr(start_files, "SOURCED_ROOT", str(sysv / "etc") + "/")
    (sysv / "init.d" / "app").write_text(
        f"#!/bin/sh\nCONF={env}/app\n[ -r $CONF ] && . $CONF\n. {sysv}/lib/lsb/init-functions\n")
    ev = _collect({"name": "app"})["evidence"]
    assert ev["environment_files"] == [f"{env}/app"]
    # the planner reads the file's settings in the environment section, redacted
    assert ev["environment"][f"{env}/app"].startswith("settings:\nAPP_OPTS='--fast'")
    assert "s3cr3t" not in json.dumps(ev)
    # a service whose script sources nothing: the host read it, and says none
    (sysv / "init.d" / "plain").write_text("#!/bin/sh\nexec /usr/bin/plain\n")
    assert _collect({"name": "plain"})["evidence"]["environment_files"] == []
    # no init script at all: nothing on the host says, and the evidence says nothing
    assert "environment_files" not in _collect({"name": "absent"})["evidence"]


def _data_dir(root: Path) -> Path:
    data = root / "data"
    (data / "base").mkdir(parents=True)
    (data / "PG_VERSION").write_text("14\n")
    (data / "postmaster.pid").write_text("4242\n/var/lib/postgresql/15/main\n1700000000\n5432\n")
    (data / "standby.signal").write_text("")
    (data / "recovery.conf.token").write_text("primary_conninfo=password=topsecret\n")
    (data / "notes").write_text("password=hunter2-long-value\n")
    (data / "big.dat").write_bytes(b"x" * 4096)
    (data / "base" / "PG_VERSION").write_text("14\n")
    (data / "stamp.bin").write_bytes(b"\x00\x01")
    os.symlink("/etc/hostname", data / "linked")
    old = time.time() - 86400
    os.utime(data / "postmaster.pid", (old, old))
    return data


def test_the_small_top_level_files_of_a_data_directory_with_content_owner_mode_and_time(sysv: Path):
    data = _data_dir(sysv)
    ev = _collect({"name": "db", "data_paths": [str(data)]}, max_bytes=20000)["evidence"]
    markers = ev["data_markers"]
    # what is in the directory, as the file system says it (read here, outside the code)
    st = os.stat(data / "PG_VERSION")
    owner = f"{host_probe.user_name(st.st_uid)}:{host_probe.group_name(st.st_gid)}"
    assert markers[f"{data}/PG_VERSION"] == (
        f"owner {owner}, mode {st.st_mode & 0o7777:04o}, 3 bytes, modified "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(st.st_mtime))}: 14")
    pid = markers[f"{data}/postmaster.pid"]
    assert pid.endswith(":\n4242\n/var/lib/postgresql/15/main\n1700000000\n5432")
    assert time.strftime("%Y-%m-%dT", time.gmtime(time.time() - 86400)) in pid
    assert markers[f"{data}/standby.signal"].endswith("(empty)")
    assert markers[f"{data}/stamp.bin"].endswith("(binary)")
    # a name that suggests a secret is listed unread; a secret in another small file is redacted
    assert markers[f"{data}/recovery.conf.token"].endswith("(content not shown: the name suggests a key or secret)")
    assert "hunter2" not in markers[f"{data}/notes"] and "topsecret" not in json.dumps(ev)
    # not the data files, not a subdirectory's files, not what a link points at
    assert set(markers) == {f"{data}/{n}" for n in ("PG_VERSION", "postmaster.pid", "standby.signal", "stamp.bin",
                                                    "recovery.conf.token", "notes")}


def test_the_data_markers_are_bounded_and_absent_when_there_are_none(sysv: Path):
    data = sysv / "many"
    data.mkdir()
    for n in range(service_evidence.MARKER_FILES + 5):
        (data / f"m{n:02d}").write_text("x")
    markers = service_evidence.data_markers({"data_paths": [str(data)]})
    assert len([k for k in markers if k.startswith("/")]) == service_evidence.MARKER_FILES
    assert markers["(left out)"] == "5 more small file(s) in the data directories"
    # a declared PID file or log is shown by its own section, not again here
    declared = service_evidence.data_markers({"data_paths": [str(data)], "pid_files": [str(data / "m00")],
                                              "logs": [str(data / "m01")]})
    assert f"{data}/m00" not in declared and f"{data}/m01" not in declared and f"{data}/m02" in declared
    empty = sysv / "empty"
    empty.mkdir()
    (empty / "dump.rdb").write_bytes(b"R" * 1000)
    assert "data_markers" not in _collect({"name": "kv", "data_paths": [str(empty)]})["evidence"]
    # the whole evidence stays within its bound
    small = _collect({"name": "db", "data_paths": [str(data)]}, max_bytes=1500)
    assert len(json.dumps(small["evidence"], ensure_ascii=False).encode()) <= 1500 and small["truncated"]


def test_a_units_state_directory_is_a_data_directory():
    units = {"db.service": {"StateDirectory": "db db/extra ../escape"}}
    assert service_evidence._data_directories({"data_paths": ["/srv/db"]}, units) == \
        ["/srv/db", "/var/lib/db", "/var/lib/db/extra"]
