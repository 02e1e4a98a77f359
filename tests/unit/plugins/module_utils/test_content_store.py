# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's content store: bytes by digest, private to its owner, bounded in size and age."""
from __future__ import annotations

import hashlib
import os
import stat
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import (
    ContentMissing, ContentStore, ContentStoreError)


def _age(store, digest, seconds):
    path = os.path.join(store.root, "objects", digest[:2], digest[2:])
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_put_returns_the_sha256_and_get_gives_the_same_bytes_back(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    data = b"listen 80;\n\x00binary\xff"
    digest = store.put(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert store.has(digest)
    assert store.get(digest) == data


def test_the_same_bytes_are_kept_once(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    assert store.put(b"a") == store.put(b"a")
    objects = [name for _d, _s, files in os.walk(tmp_path / "store" / "objects") for name in files]
    assert len(objects) == 1


def test_the_store_and_its_objects_are_readable_by_the_owner_only(tmp_path):
    root = tmp_path / "store"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    store = ContentStore(str(root))
    digest = store.put(b"secret")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(root / "objects").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(root / "objects" / digest[:2] / digest[2:]).st_mode) == 0o600


def test_a_store_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "store").write_text("x")
    with pytest.raises(ContentStoreError, match="not a directory"):
        ContentStore(str(tmp_path / "store"))


def test_missing_content_is_named_and_a_bad_digest_is_refused(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    absent = hashlib.sha256(b"never").hexdigest()
    assert not store.has(absent)
    with pytest.raises(ContentMissing, match=absent):
        store.get(absent)
    with pytest.raises(ValueError, match="SHA-256"):
        store.get("../../etc/passwd")
    with pytest.raises(ValueError, match="SHA-256"):
        store.has("ABC")


def test_damaged_content_is_reported_not_returned(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    digest = store.put(b"original")
    path = tmp_path / "store" / "objects" / digest[:2] / digest[2:]
    path.write_bytes(b"tampered")
    with pytest.raises(ContentStoreError, match="damaged"):
        store.get(digest)


def test_prune_removes_what_is_older_than_the_age(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    old = store.put(b"old")
    new = store.put(b"new")
    _age(store, old, 3600)
    assert store.prune(max_bytes=10 ** 6, max_age_s=600) == 1
    assert not store.has(old)
    assert store.has(new)


def test_prune_removes_the_oldest_until_the_rest_fits_the_size(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    digests = [store.put(bytes([n]) * 100) for n in range(5)]
    for age, digest in zip((50, 40, 30, 20, 10), digests):
        _age(store, digest, age)
    assert store.prune(max_bytes=250, max_age_s=3600) == 3
    assert [store.has(d) for d in digests] == [False, False, False, True, True]
    assert store.size() == 200


def test_putting_again_refreshes_so_what_is_in_use_stays(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    kept = store.put(b"k" * 100)
    other = store.put(b"o" * 100)
    _age(store, kept, 100)
    _age(store, other, 50)
    store.put(b"k" * 100)
    store.prune(max_bytes=100, max_age_s=3600)
    assert store.has(kept) and not store.has(other)


def test_prune_refuses_bounds_that_are_not_whole_numbers(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    with pytest.raises(ValueError, match="max_bytes"):
        store.prune(-1, 10)
    with pytest.raises(ValueError, match="max_age_s"):
        store.prune(10, "1d")


def test_put_refuses_text(tmp_path):
    store = ContentStore(str(tmp_path / "store"))
    with pytest.raises(TypeError, match="bytes"):
        store.put("text")
