# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots before a change and restoring them: files, links, directories, missing paths, bounds."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot


def _state(path):
    """What a path is, read independently of the module: bytes, mode, owner, link target."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path), info.st_uid, info.st_gid)
    if stat.S_ISDIR(info.st_mode):
        return ("dir", stat.S_IMODE(info.st_mode), sorted(os.listdir(path)))
    with open(path, "rb") as handle:
        return ("file", handle.read(), stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def _session(tmp_path, attempt=1, incident="nginx-20261128T060000Z"):
    return snapshot.Session(str(tmp_path / "state"), incident, attempt, 10 ** 7, 3600)


def test_an_edited_file_is_put_back_with_its_bytes_and_mode(tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_bytes(b"listen 80;\n")
    os.chmod(conf, 0o640)
    before = _state(conf)
    session = _session(tmp_path)
    assert session.keep([{"path": str(conf), "tree": False}]) == []
    conf.write_bytes(b"listen 8080;\n")
    os.chmod(conf, 0o666)
    changed = session.changed()
    assert [c["path"] for c in changed] == [str(conf)]
    assert "-listen 80;" in changed[0]["diff"] and "+listen 8080;" in changed[0]["diff"]
    outcome = session.rollback()
    assert outcome["restored"] == [str(conf)] and outcome["failed"] == []
    assert _state(conf) == before


def test_what_a_command_created_is_removed_and_what_it_moved_comes_back(tmp_path):
    source = tmp_path / "app.conf"
    source.write_text("key = value\n")
    moved = tmp_path / "app.conf.bak"
    made = tmp_path / "newdir"
    before = _state(source)
    session = _session(tmp_path)
    session.keep([{"path": str(source), "tree": True}, {"path": str(moved), "tree": True},
                  {"path": str(made), "tree": True}])
    os.rename(source, moved)
    made.mkdir()
    (made / "inner").write_text("x")
    outcome = session.rollback()
    assert sorted(outcome["restored"]) == sorted([str(source), str(moved), str(made)])
    assert _state(source) == before
    assert not moved.exists() and not made.exists()


def test_a_removed_directory_tree_comes_back_whole(tmp_path):
    tree = tmp_path / "conf.d"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.conf").write_text("a\n")
    (tree / "sub" / "b.conf").write_text("b\n")
    os.symlink("a.conf", tree / "link")
    os.chmod(tree / "sub", 0o750)
    session = _session(tmp_path)
    session.keep([{"path": str(tree), "tree": True}])
    import shutil
    shutil.rmtree(tree)
    assert session.rollback()["failed"] == []
    assert (tree / "a.conf").read_text() == "a\n"
    assert (tree / "sub" / "b.conf").read_text() == "b\n"
    assert os.readlink(tree / "link") == "a.conf"
    assert stat.S_IMODE(os.stat(tree / "sub").st_mode) == 0o750


def test_a_symlink_retargeted_is_put_back_and_a_replaced_link_too(tmp_path):
    link = tmp_path / "current"
    os.symlink("/etc/one", link)
    session = _session(tmp_path)
    session.keep([{"path": str(link), "tree": True}])
    os.unlink(link)
    link.write_text("now a file")
    assert session.rollback()["restored"] == [str(link)]
    assert os.readlink(link) == "/etc/one"


def test_paths_left_as_they_were_are_not_touched(tmp_path):
    conf = tmp_path / "same.conf"
    conf.write_text("x")
    session = _session(tmp_path)
    session.keep([{"path": str(conf), "tree": False}])
    assert session.changed() == []
    assert session.rollback() == {"restored": [], "failed": [], "unchanged": [str(conf)]}


def test_a_path_is_kept_once_per_attempt_as_it_was_before_the_first_command(tmp_path):
    conf = tmp_path / "c"
    conf.write_text("first")
    session = _session(tmp_path)
    session.keep([{"path": str(conf), "tree": False}])
    conf.write_text("second")
    session.keep([{"path": str(conf), "tree": False}])
    conf.write_text("third")
    session.rollback()
    assert conf.read_text() == "first"


def test_a_directory_over_the_bounds_keeps_its_metadata_and_says_its_contents_were_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot, "TREE_MAX_ENTRIES", 3)
    big = tmp_path / "big"
    big.mkdir()
    for n in range(5):
        (big / str(n)).write_text("x")
    session = _session(tmp_path)
    problems = session.keep([{"path": str(big), "tree": True}])
    assert problems and "not kept" in problems[0]
    import shutil
    shutil.rmtree(big)
    outcome = session.rollback()
    assert outcome["failed"] and "contents were not kept" in outcome["failed"][0]["error"]


def test_the_undo_manifest_names_what_a_healed_attempt_changed_and_skips_rolled_back_ones(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("1")
    second.write_text("2")
    failed = _session(tmp_path, attempt=1)
    failed.keep([{"path": str(first), "tree": False}])
    first.write_text("changed by attempt 1")
    changed = failed.changed()
    failed.rollback()
    failed.save(changed, rolled_back=True)
    healed = _session(tmp_path, attempt=2)
    healed.keep([{"path": str(second), "tree": False}])
    second.write_text("fixed")
    healed.save(healed.changed(), rolled_back=False)
    manifest = snapshot.load_manifest(str(tmp_path / "state"), "nginx-20261128T060000Z")
    plan = snapshot.undo_plan(manifest)
    assert [p["path"] for p in plan] == [str(second)]
    assert snapshot.same(snapshot.capture(str(second), None), dict(plan[0]["after"]))
    store = snapshot.ContentStore(str(tmp_path / "state" / "content"))
    assert snapshot.restore(str(second), plan[0]["before"], store) == (True, "restored")
    assert second.read_text() == "2"
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "undo").st_mode) == 0o700


def test_a_bad_incident_id_is_refused_by_name(tmp_path):
    with pytest.raises(snapshot.SnapshotError, match="incident id"):
        snapshot.Session(str(tmp_path), "../etc", 1, 10, 10)


def test_an_unusable_store_makes_every_declared_path_a_problem():
    session = snapshot.Unavailable("disk full", "x-1")
    assert session.keep([{"path": "/etc/a", "tree": False}]) == ["/etc/a could not be kept: disk full"]


def test_the_summary_carries_no_content(tmp_path):
    conf = tmp_path / "secret.conf"
    conf.write_text("password = hunter2\n")
    state = snapshot.capture(str(conf), None)
    shown = snapshot.summary(state)
    assert set(shown) <= {"kind", "size", "digest", "mode", "uid", "gid"}
    assert "hunter2" not in repr(shown)
