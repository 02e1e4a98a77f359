# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team, stop 35: a symbolic link the service's own (unprivileged) user plants in a
directory it may write (Debian's /etc/redis, a data directory), pointing at a file only root
may read or write. The known-good baseline and the plan runner run as root: neither may read
through such a link into the evidence, nor write through it when a restore copies a file back.
Real files, real links, the real kernel's Landlock; assertions on the bytes on disk and on the
evidence the host returns."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import known_good, landlock, plan_runner

SERVICE_UID = 4242  # the service's account: not root
SECRET = b"root:$6$saltsalt$Zm9yZ2VkaGFzaGZvcmdlZGhhc2g:19000:0:99999:7:::\nTOPSECRET-MARKER\n"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting a link owned by another user needs root")
needs_landlock = pytest.mark.skipif(landlock.abi_version() < 1 or os.geteuid() != 0,
                                    reason="needs Landlock and root")


def _no_systemctl(_argv):
    return 1, ""


@pytest.fixture()
def host(tmp_path: Path):
    """A service config directory its user owns, and a root-only file elsewhere."""
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


def _plant(link: Path, target: Path) -> None:
    os.symlink(str(target), str(link))
    os.lchown(str(link), SERVICE_UID, SERVICE_UID)


def _pass(defn, root, healthy):
    return known_good.record_or_compare(defn, healthy, str(root), "sysv", _no_systemctl)


@needs_root
def test_a_link_the_service_user_planted_is_never_read_into_the_drift(host, tmp_path):
    defn, conf, secret = host
    _pass(defn, tmp_path / "kg", True)
    _plant(conf / "extra.conf", secret)
    drift = _pass(defn, tmp_path / "kg", False)
    assert b"TOPSECRET-MARKER".decode() not in repr(drift), drift
    stored = b"".join(p.read_bytes() for p in (tmp_path / "kg" / "content").rglob("*") if p.is_file())
    assert b"TOPSECRET-MARKER" not in stored, "the root-only file was copied into the content store"


@needs_root
def test_a_config_file_swapped_for_a_planted_link_is_not_restored_through_it(host, tmp_path):
    defn, conf, secret = host
    _pass(defn, tmp_path / "kg", True)
    (conf / "redis.conf").unlink()
    _plant(conf / "redis.conf", secret)
    drift = _pass(defn, tmp_path / "kg", False)
    assert "TOPSECRET-MARKER" not in repr(drift)
    [item] = drift["drift"]
    assert item["change"] == "planted_link" and "owned by uid %d" % SERVICE_UID in item["link"], item
    assert not item.get("restore") and not item.get("aside")


@needs_root
def test_a_link_planted_while_healthy_is_not_recorded_through(host, tmp_path):
    defn, conf, secret = host
    _plant(conf / "tls.conf", secret)
    _pass(defn, tmp_path / "kg", True)
    stored = b"".join(p.read_bytes() for p in (tmp_path / "kg" / "content").rglob("*") if p.is_file())
    assert b"TOPSECRET-MARKER" not in stored


def _run(argv, confine):
    commands = plan_runner.normalise_commands([{"argv": argv, "confine": confine, "approved": False}])
    return plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement="preferred",
                                timeout=20)["results"][0]


@needs_landlock
def test_a_restore_copy_through_a_planted_link_leaves_the_linked_file_untouched(host, tmp_path):
    _defn, conf, secret = host
    good = tmp_path / "staged"
    good.write_bytes(b"port 6379\n")
    (conf / "redis.conf").unlink()
    _plant(conf / "redis.conf", secret)
    result = _run(["cp", "-p", str(good), str(conf / "redis.conf")],
                  {"write": [str(conf / "redis.conf")], "exec": ["cp"]})
    assert secret.read_bytes() == SECRET, result
    assert "symbolic link owned by uid %d" % SERVICE_UID in result["confinement"], result


def _approved_restore_over_a_planted_link(conf, secret, tmp_path):
    """An approved ``cp`` of a staged known-good config over redis.conf, swapped for a link to ``secret``."""
    good = tmp_path / "staged"
    good.write_bytes(b"port 6379\n")
    (conf / "redis.conf").unlink()
    _plant(conf / "redis.conf", secret)
    return plan_runner.normalise_commands([{"argv": ["cp", str(good), str(conf / "redis.conf")],
                                            "confine": {"write": [str(conf / "redis.conf")], "exec": ["cp"]},
                                            "approved": True}])


@needs_landlock
def test_an_approved_restore_is_not_written_through_a_planted_link_either(host, tmp_path):
    _defn, conf, secret = host
    commands = _approved_restore_over_a_planted_link(conf, secret, tmp_path)
    plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement="preferred", timeout=20)
    assert secret.read_bytes() == SECRET


@needs_root
def test_confinement_off_still_never_writes_through_a_planted_link(host, tmp_path):
    _defn, conf, secret = host
    commands = _approved_restore_over_a_planted_link(conf, secret, tmp_path)
    result = plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement="off",
                                  timeout=20)["results"][0]
    assert secret.read_bytes() == SECRET and "owned by uid %d" % SERVICE_UID in result["confinement"], result


@needs_root
@pytest.mark.parametrize("mode,owner,why", [
    (0o775, (0, 4242), "gid 4242 may write to it (mode 0775) and has members other than this user"),
    (0o777, (0, 0), "every user may write to it (mode 0777)"),
    (0o755, (4242, 0), "which belongs to uid 4242"), (0o1777, (0, 0), ""), (0o755, (0, 0), ""),
])
def test_a_root_link_is_trusted_only_in_a_directory_no_other_account_may_change(tmp_path, mode, owner, why):
    from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link
    holder = tmp_path / "dir"
    holder.mkdir()
    (tmp_path / "target").write_bytes(b"x")
    os.symlink("../target", str(holder / "link"))
    os.chown(holder, *owner)
    os.chmod(holder, mode)
    found = planted_link(str(holder / "link"))
    assert (why in found and found) if why else found == "", found
    # a link reached through another link is examined too
    os.symlink(str(holder), str(tmp_path / "via"))
    assert planted_link(str(tmp_path / "via" / "link")) == found


@needs_landlock
def test_a_root_owned_link_in_a_root_only_directory_is_still_followed(tmp_path):
    # Debian's own links (sites-enabled -> sites-available) keep working
    real = tmp_path / "avail" / "site"
    real.parent.mkdir()
    real.write_bytes(b"a\n")
    enabled = tmp_path / "enabled"
    enabled.mkdir()
    os.symlink(str(real), str(enabled / "site"))
    good = tmp_path / "staged"
    good.write_bytes(b"b\n")
    result = _run(["cp", str(good), str(enabled / "site")], {"write": [str(enabled / "site")], "exec": ["cp"]})
    assert result["rc"] == 0 and real.read_bytes() == b"b\n", result


@needs_root
@pytest.mark.parametrize("sub", ["known-good", "known-good/restore", "known-good/baselines"])
def test_a_known_good_directory_another_account_could_swap_is_refused(tmp_path, sub):
    root = tmp_path / "state"
    known_good.Baselines(str(root))
    elsewhere = tmp_path / "theirs"
    elsewhere.mkdir()
    os.chown(elsewhere, SERVICE_UID, SERVICE_UID)
    target = root / sub
    for path in sorted(target.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    target.rmdir()
    os.symlink(str(elsewhere), str(target))
    with pytest.raises(known_good.KnownGoodError, match="unusable"):
        known_good.Baselines(str(root))


@needs_root
def test_an_undo_never_writes_through_a_directory_swapped_for_a_planted_link(tmp_path):
    # the service's user owns its data directory: between the snapshot and the undo it swaps a
    # subdirectory for a link to a root-only one; the undo must not put the kept bytes there
    from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
    from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore
    data = tmp_path / "var" / "lib" / "redis"
    (data / "d").mkdir(parents=True)
    (data / "d" / "job").write_bytes(b"* * * * * root id > /tmp/owned\n")
    os.chown(data, SERVICE_UID, SERVICE_UID)
    os.chown(data / "d", SERVICE_UID, SERVICE_UID)
    root_only = tmp_path / "etc" / "cron.d"
    root_only.mkdir(parents=True)
    store = ContentStore(str(tmp_path / "store"))
    kept = snapshot.capture(str(data / "d" / "job"), store)
    (data / "d" / "job").unlink()                                  # the attempt changed it
    (data / "d").rmdir()
    _plant(data / "d", root_only)                                  # the user's swap
    ok, _note = snapshot.restore(str(data / "d" / "job"), kept, store)
    assert not (root_only / "job").exists(), "the undo wrote into the root-only directory"
    assert not ok
