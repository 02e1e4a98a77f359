# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team, stop 36: a hard link the service's own (unprivileged) user makes, in a directory it
may write, to a file only root may read or write (where ``fs.protected_hardlinks`` is off, or on a
filesystem that does not honour it). A hard link has no owner of its own: ``lstat`` of it is the
root-owned file. Root must neither read it into the known-good baseline nor write, chmod or chown
through it. Real files, real links; assertions on the bytes and mode on disk and on the evidence."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import known_good, plan_runner
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link

SERVICE_UID = 4242
SECRET = b"root:$6$saltsalt$Zm9yZ2VkaGFzaA:19000:0:99999:7:::\nHARDLINK-MARKER\n"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a directory another account owns needs root")


def _no_systemctl(_argv):
    return 1, ""


@pytest.fixture()
def host(tmp_path: Path):
    conf = tmp_path / "etc" / "redis"
    conf.mkdir(parents=True)
    (conf / "redis.conf").write_bytes(b"port 6379\n")
    os.chown(conf, SERVICE_UID, SERVICE_UID)
    secret = tmp_path / "root-only" / "shadow"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    os.chmod(secret, 0o600)
    defn = {"name": "redis", "units": [], "config_paths": [str(conf)], "config_test": []}
    return defn, conf, secret


def _pass(defn, root, healthy):
    return known_good.record_or_compare(defn, healthy, str(root), "sysv", _no_systemctl)


def _stored(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (root / "content").rglob("*") if p.is_file())


@needs_root
def test_a_hard_link_made_while_healthy_is_not_read_into_the_baseline(host, tmp_path):
    defn, conf, secret = host
    os.link(str(secret), str(conf / "tls.conf"))
    _pass(defn, tmp_path / "kg", True)
    assert b"HARDLINK-MARKER" not in _stored(tmp_path / "kg")


@needs_root
def test_a_config_swapped_for_a_hard_link_is_shown_never_read_nor_restored(host, tmp_path):
    defn, conf, secret = host
    _pass(defn, tmp_path / "kg", True)
    (conf / "redis.conf").unlink()
    os.link(str(secret), str(conf / "redis.conf"))
    drift = _pass(defn, tmp_path / "kg", False)
    assert "HARDLINK-MARKER" not in repr(drift) and b"HARDLINK-MARKER" not in _stored(tmp_path / "kg")
    [item] = drift["drift"]
    assert item["change"] == "planted_link" and "2 hard links" in item["link"], item
    assert not item.get("restore") and not item.get("aside")


@needs_root
@pytest.mark.parametrize("argv", [
    ["cp", "{good}", "{target}"], ["chmod", "0644", "{target}"], ["chown", "4242", "{target}"],
], ids=["write", "chmod", "chown"])
@pytest.mark.parametrize("confinement", ["preferred", "off"])
def test_no_command_writes_chmods_or_chowns_through_a_hard_link(host, tmp_path, argv, confinement):
    _defn, conf, secret = host
    good = tmp_path / "staged"
    good.write_bytes(b"port 6379\n")
    (conf / "redis.conf").unlink()
    os.link(str(secret), str(conf / "redis.conf"))
    before = os.stat(secret)
    target = str(conf / "redis.conf")
    commands = plan_runner.normalise_commands([{
        "argv": [a.format(good=good, target=target) for a in argv],
        "confine": {"write": [target], "exec": [argv[0]]}, "approved": True}])
    result = plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement=confinement,
                                  timeout=20)["results"][0]
    after = os.stat(secret)
    assert secret.read_bytes() == SECRET, result
    assert (stat.S_IMODE(after.st_mode), after.st_uid) == (stat.S_IMODE(before.st_mode), before.st_uid), result
    assert "hard links" in result["confinement"], result


@needs_root
@pytest.mark.parametrize("mode,owner,refused", [
    (0o775, (0, 4242), True), (0o777, (0, 0), True), (0o755, (4242, 0), True),
    (0o755, (0, 0), False),
    # sticky keeps others from renaming names, not from adding them, and a hard link's owner is the
    # file's: the name may be another account's all the same
    (0o1777, (0, 0), True),
])
def test_a_file_with_two_names_is_trusted_only_where_no_other_account_adds_names(tmp_path, mode, owner, refused):
    holder = tmp_path / "dir"
    holder.mkdir()
    (tmp_path / "target").write_bytes(b"x")
    os.link(str(tmp_path / "target"), str(holder / "name"))
    (holder / "single").write_bytes(b"y")
    os.chown(holder, *owner)
    os.chmod(holder, mode)
    found = planted_link(str(holder / "name"))
    assert ("2 hard links" in found) if refused else found == "", found
    assert planted_link(str(holder / "single")) == ""  # one name: nothing to follow
    # reached through a (root's own) symbolic link, the file it ends at is examined the same way
    os.symlink(str(holder / "name"), str(tmp_path / "via"))
    assert planted_link(str(tmp_path / "via")) == found


@needs_root
def test_an_undo_writes_where_it_checked_even_when_the_directory_is_swapped_in_between(tmp_path, monkeypatch):
    # the check passes; then, before the write, the service's user swaps the directory for a link
    # to a root-only one: the write must not land there (a real race made deterministic by a seam)
    from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
    from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore
    data = tmp_path / "var" / "lib" / "redis"
    (data / "d").mkdir(parents=True)
    (data / "d" / "job").write_bytes(b"* * * * * root id > /tmp/owned\n")
    os.chown(data, SERVICE_UID, SERVICE_UID)
    root_only = tmp_path / "etc" / "cron.d"
    root_only.mkdir(parents=True)
    store = ContentStore(str(tmp_path / "store"))
    kept = snapshot.capture(str(data / "d" / "job"), store)
    (data / "d" / "job").write_bytes(b"changed\n")

    def swap(_path):
        (data / "d" / "job").unlink()
        (data / "d").rmdir()
        os.symlink(str(root_only), str(data / "d"))
        os.lchown(str(data / "d"), SERVICE_UID, SERVICE_UID)
    monkeypatch.setattr(snapshot, "_between_check_and_use", swap)
    ok, note = snapshot.restore(str(data / "d" / "job"), kept, store)
    assert list(root_only.iterdir()) == [], "the undo wrote into the root-only directory"
    assert not ok and "not put back" in note, note


@needs_root
def test_an_undo_of_a_file_still_puts_it_back_with_its_owner_and_mode(tmp_path):
    from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
    from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore
    target = tmp_path / "app.conf"
    target.write_bytes(b"good\n")
    os.chown(target, SERVICE_UID, 0)
    os.chmod(target, 0o640)
    store = ContentStore(str(tmp_path / "store"))
    kept = snapshot.capture(str(target), store)
    target.write_bytes(b"bad\n")
    os.chmod(target, 0o666)
    assert snapshot.restore(str(target), kept, store) == (True, "restored")
    info = os.stat(target)
    assert (target.read_bytes(), stat.S_IMODE(info.st_mode), info.st_uid) == (b"good\n", 0o640, SERVICE_UID)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".sentinel-restore")] == []
