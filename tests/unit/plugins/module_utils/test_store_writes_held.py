# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's root-only store writes where it was checked: its directories are held from the check
on, so a store directory swapped afterwards (for a link to a root-only directory laid out as a
store) receives nothing, loses nothing and is read from by nobody. Each swap is made between the
check (opening the store, the session, the known-good record) and the use (a put, a prune, a
manifest, a staged copy), deterministically; the assertions are on the directories on disk."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import content_store, known_good, snapshot
from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import (
    ContentStore, ContentStoreError)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="snapshots keep owners: the host side runs as root")

DATA = b"maxmemory 2gb\n"
DIGEST = hashlib.sha256(DATA).hexdigest()


def _files(top: Path) -> dict:
    """Every file under ``top`` (not through links) with its bytes."""
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()
            and not p.is_symlink()}


@pytest.fixture()
def vault(tmp_path: Path) -> Path:
    """A root-only directory laid out as a store would be (so a write by name would land in it),
    with one old object of its own that a prune by name would remove."""
    top = tmp_path / "vault"
    (top / "objects" / "ab").mkdir(parents=True)
    (top / "undo").mkdir()
    for sub in ("baselines", "restore"):
        (top / "known-good" / sub).mkdir(parents=True)
    (top / "baselines").mkdir()
    (top / "restore").mkdir()
    keep = top / "objects" / "ab" / ("c" * 62)
    keep.write_bytes(b"root's own\n")
    os.utime(keep, (time.time() - 10 ** 6, time.time() - 10 ** 6))
    top.chmod(0o700)
    return top


def _swap(path: Path, vault: Path) -> Path:
    """Move ``path`` aside and put a link to ``vault`` in its place; where the checked directory went."""
    aside = path.with_name(path.name + ".checked")
    os.rename(path, aside)
    os.symlink(str(vault), str(path))
    return aside


def test_a_put_after_the_store_was_swapped_lands_in_the_checked_store(tmp_path, vault):
    store = ContentStore(str(tmp_path / "state" / "content"))
    before = _files(vault)
    checked = _swap(tmp_path / "state" / "content", vault)
    assert store.put(DATA) == DIGEST
    assert _files(vault) == before
    assert (checked / "objects" / DIGEST[:2] / DIGEST[2:]).read_bytes() == DATA
    assert store.get(DIGEST) == DATA and store.has(DIGEST)


def test_the_objects_directory_swapped_after_the_check_is_not_written_either(tmp_path, vault):
    store = ContentStore(str(tmp_path / "state" / "content"))
    before = _files(vault)
    checked = _swap(tmp_path / "state" / "content" / "objects", vault / "objects")
    store.put(DATA)
    assert _files(vault) == before
    assert (checked / DIGEST[:2] / DIGEST[2:]).read_bytes() == DATA


def test_a_prune_after_the_store_was_swapped_removes_nothing_where_the_link_points(tmp_path, vault):
    store = ContentStore(str(tmp_path / "state" / "content"))
    store.put(DATA)
    before = _files(vault)
    checked = _swap(tmp_path / "state" / "content", vault)
    assert store.prune(0, 0) == 1   # everything is over a size of 0: the checked store's one object
    assert _files(vault) == before
    assert _files(checked) == {}


def test_a_store_swapped_between_being_held_and_being_checked_is_refused(tmp_path, vault, monkeypatch):
    root = tmp_path / "state" / "content"
    root.mkdir(parents=True, mode=0o700)
    monkeypatch.setattr(content_store, "_between_hold_and_check", lambda _path: _swap(root, vault))
    with pytest.raises(ContentStoreError, match="changed while it was checked"):
        ContentStore(str(root))
    assert _files(root.with_name("content.checked")) == {}


def test_the_undo_manifest_is_written_in_the_root_the_session_checked(tmp_path, vault):
    state = tmp_path / "state"
    session = snapshot.Session(str(state), "inc-7", 1, 10 ** 6, 3600)
    conf = tmp_path / "app.conf"
    conf.write_bytes(DATA)
    session.keep([{"path": str(conf)}])
    conf.write_bytes(b"maxmemory 1gb\n")
    before = _files(vault)
    checked = _swap(state, vault)
    found = snapshot.settle(session, "", True, True)
    assert not found["error"], found
    assert _files(vault) == before
    manifest = json.loads((checked / "undo" / "inc-7.json").read_bytes())
    assert [e["path"] for e in manifest["attempts"][0]["entries"]] == [str(conf)]
    # read back through the path as it is now: the root is a link to the vault, which has none
    assert snapshot.load_manifest(str(checked), "inc-7") == manifest


def test_an_undo_directory_swapped_for_a_link_is_refused_not_followed(tmp_path, vault):
    state = tmp_path / "state"
    session = snapshot.Session(str(state), "inc-8", 1, 10 ** 6, 3600)
    session.save([], False)
    before = _files(vault)
    _swap(state / "undo", vault / "undo")
    with pytest.raises(ContentStoreError, match="is not a directory"):
        session.save([], False)
    with pytest.raises(ContentStoreError, match="is not a directory"):
        snapshot.load_manifest(str(state), "inc-8")
    assert _files(vault) == before


def test_known_good_manifests_and_staged_copies_go_where_the_record_was_checked(tmp_path, vault):
    root = tmp_path / "state"
    baselines = known_good.Baselines(str(root))
    before = _files(vault)
    checked = _swap(root / "known-good", vault / "known-good")
    entry = {"sha256": DIGEST, "size": len(DATA), "mode": "0640", "uid": 0, "gid": 0}
    baselines.record("redis", {"/etc/redis/redis.conf": entry})
    baselines.store.put(DATA)
    staged = baselines.stage(entry)
    baselines.keep_aside("redis", "/etc/redis/redis.conf", b"maxmemory 1gb\n")
    assert _files(vault) == before
    assert json.loads((checked / "baselines" / "redis.json").read_bytes())["files"] == {"/etc/redis/redis.conf": entry}
    kept = checked / "restore" / DIGEST
    assert kept.read_bytes() == DATA and stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert staged == str(root / "known-good" / "restore" / DIGEST)
    assert (checked / "aside.json").exists()
    assert baselines.manifest("redis")["files"] == {"/etc/redis/redis.conf": entry}
