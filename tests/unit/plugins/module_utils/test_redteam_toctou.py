# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team, stop 37: check-then-use on the host. Root checks a path, then uses it; the service's
own account swaps it in between (a directory for a symbolic link, the file for a hard link). Each
swap is made at the worst moment through the code's own seams, with real files and real links; the
assertions are on the bytes, modes and owners on disk."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import (
    held_path, landlock, plan_runner, snapshot)
from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore

SERVICE_UID = 4242
SECRET = b"root:$6$saltsalt$Zm9yZ2VkaGFzaA:19000:0:99999:7:::\nTOCTOU-MARKER\n"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a directory another account owns needs root")


@pytest.fixture()
def host(tmp_path: Path):
    """A service directory its account owns (conf/app.conf in it), a root-only directory with a
    file of the same name, and a root-only secret."""
    service = tmp_path / "srv" / "app"
    (service / "conf").mkdir(parents=True)
    (service / "conf" / "app.conf").write_bytes(b"workers 2\n")
    for path in (service, service / "conf", service / "conf" / "app.conf"):
        os.chown(path, SERVICE_UID, SERVICE_UID)
    vault = tmp_path / "root-only"
    vault.mkdir(mode=0o700)
    (vault / "app.conf").write_bytes(SECRET)
    (vault / "shadow").write_bytes(SECRET)
    os.chmod(vault / "shadow", 0o600)
    return service, vault


def _as_service(path: Path) -> None:
    os.lchown(path, SERVICE_UID, SERVICE_UID)


def _swap_conf_for_link(service: Path, vault: Path) -> None:
    """What the service's account can do in its own directory: move conf away, link it elsewhere."""
    os.rename(service / "conf", service / "conf.old")
    os.symlink(str(vault), str(service / "conf"))
    _as_service(service / "conf")


def _vault_untouched(vault: Path) -> None:
    """No entry added to the root-only directory, and its files' bytes, modes and owners as made
    (a hard link the test itself made to the secret is its only other name)."""
    assert sorted(p.name for p in vault.iterdir()) == ["app.conf", "shadow"]
    assert (vault / "app.conf").read_bytes() == SECRET and (vault / "shadow").read_bytes() == SECRET
    info = os.stat(vault / "shadow")
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o600, 0, 0)


# ---------------------------------------------------------------- the helper


def test_a_link_the_service_account_planted_is_refused_at_any_component(host):
    service, vault = host
    _swap_conf_for_link(service, vault)
    with pytest.raises(held_path.UnsafePath, match="symbolic link owned by uid 4242"):
        held_path.open_file(str(service / "conf" / "app.conf"))
    os.symlink(str(vault / "shadow"), str(service / "last"))  # root's own link, in the account's directory
    with pytest.raises(held_path.UnsafePath, match="a directory uid 4242 owns"):
        held_path.open_file(str(service / "last"))


def test_root_s_own_links_in_root_s_directories_are_followed(host, tmp_path):
    _service, vault = host
    os.symlink(str(vault), str(tmp_path / "absolute"))
    os.symlink("root-only/../root-only", str(tmp_path / "relative"))
    for via in ("absolute", "relative"):
        fd = held_path.open_file(str(tmp_path / via / "app.conf"))
        try:
            assert os.read(fd, 100) == SECRET
        finally:
            os.close(fd)


def test_a_hard_link_is_refused_only_where_another_account_may_add_names(host):
    service, vault = host
    os.link(str(vault / "shadow"), str(service / "conf" / "tls.conf"))
    with pytest.raises(held_path.UnsafePath, match="2 hard links"):
        held_path.open_file(str(service / "conf" / "tls.conf"))
    os.link(str(vault / "shadow"), str(vault / "second-name"))
    os.close(held_path.open_file(str(vault / "second-name")))  # root's own directory: root made it


def test_a_directory_swapped_after_it_is_held_is_not_where_the_file_is_opened(host, monkeypatch):
    service, vault = host
    monkeypatch.setattr(held_path, "_between_check_and_use", lambda _path: _swap_conf_for_link(service, vault))
    fd = held_path.open_file(str(service / "conf" / "app.conf"), os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"written\n")
    os.close(fd)
    _vault_untouched(vault)
    assert (service / "conf.old" / "app.conf").read_bytes() == b"written\n"  # the directory that was checked


# ---------------------------------------------------------------- 1. the known-good restore (cp -p)


def _restore(service: Path, staged: Path, confinement: str = "off") -> dict:
    target = str(service / "conf" / "app.conf")
    commands = plan_runner.normalise_commands([{
        "argv": ["cp", "-p", str(staged), target], "become": True, "approved": True,
        "confine": {"write": [target], "exec": ["cp"]}}])
    return plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement=confinement,
                                timeout=20)["results"][0]


@pytest.fixture()
def staged(tmp_path: Path) -> Path:
    path = tmp_path / "staged"
    path.write_bytes(b"workers 4\n")
    os.chown(path, SERVICE_UID, 0)
    os.chmod(path, 0o640)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


@pytest.mark.parametrize("confinement", ["required", "off"])
def test_the_restore_copies_as_cp_p_would(host, staged, confinement):
    service, _vault = host
    result = _restore(service, staged, confinement)
    assert result["rc"] == 0 and result["held"], result
    info = os.stat(service / "conf" / "app.conf")
    assert (service / "conf" / "app.conf").read_bytes() == b"workers 4\n"
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, int(info.st_mtime)) == (
        0o640, SERVICE_UID, 0, 1_000_000_000)


@pytest.mark.parametrize("swap", ["directory", "symlink", "hard link"])
def test_the_restore_never_writes_where_a_swap_after_the_checks_points(host, staged, monkeypatch, swap):
    service, vault = host
    conf = service / "conf" / "app.conf"

    def swapped(_command):
        if swap == "directory":
            _swap_conf_for_link(service, vault)
        elif swap == "symlink":
            conf.unlink()
            os.symlink(str(vault / "shadow"), str(conf))
            _as_service(conf)
        else:  # as where fs.protected_hardlinks is off
            conf.unlink()
            os.link(str(vault / "shadow"), str(conf))
    monkeypatch.setattr(plan_runner, "_between_check_and_use", swapped)
    result = _restore(service, staged)
    _vault_untouched(vault)
    assert result["rc"] == 1 and result["reason"].startswith("refused:"), result


# ---------------------------------------------------------------- 2. declared write paths (Landlock)


def test_a_declared_path_swapped_before_its_rule_is_made_gets_no_rule(host, monkeypatch):
    if landlock.abi_version() < 1:
        pytest.skip(landlock.unavailable_reason())
    service, vault = host
    conf = service / "conf" / "app.conf"

    def swapped(_paths):
        conf.unlink()
        os.symlink(str(vault / "shadow"), str(conf))
        _as_service(conf)
    monkeypatch.setattr(landlock, "_between_check_and_use", swapped)
    commands = plan_runner.normalise_commands([{
        "argv": ["truncate", "-s", "0", str(conf)], "become": True, "approved": True,
        "confine": {"write": [str(conf)], "exec": ["truncate"]}}])
    result = plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement="preferred",
                                  timeout=20)["results"][0]
    _vault_untouched(vault)
    assert result["skipped"] and "refused" in result["reason"] and "uid 4242" in result["confinement"], result


# ---------------------------------------------------------------- 3. snapshots and hard links


@pytest.mark.parametrize("approved", [False, True])
def test_a_hard_link_in_a_kept_tree_is_never_read_and_the_record_says_so(host, tmp_path, approved):
    service, vault = host
    conf = service / "conf"
    os.link(str(vault / "shadow"), str(conf / "tls.conf"))  # as where fs.protected_hardlinks is off
    session = snapshot.Session(str(tmp_path / "state"), "inc-1", 1, 10 ** 8, 3600)
    commands = plan_runner.normalise_commands([{
        "argv": ["touch", str(conf / "new.conf")], "become": True, "approved": approved,
        "confine": {"create": [str(conf)], "exec": ["touch"]}, "keep": [{"path": str(conf), "tree": True}]}])
    result = plan_runner.run_plan(commands, {}, plan_runner.invoking_identity({}), confinement="off",
                                  snapshots=session, timeout=20)["results"][0]
    found = snapshot.settle(session, "", False, True)
    _vault_untouched(vault)
    if approved:  # a human accepted that it cannot be undone: it runs, and the record says what was not kept
        assert result["rc"] == 0 and "tls.conf" in " ".join(result["unkept"]), result
    else:
        assert result["skipped"] and "needs a human's approval" in result["reason"], result
    assert any("tls.conf" in line and "2 hard links" in line for line in found["unkept"]), found
    stored = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert b"TOCTOU-MARKER" not in stored and "TOCTOU" not in repr(found)


def test_a_file_swapped_for_a_hard_link_during_the_command_is_not_read_after_it(host, tmp_path):
    service, vault = host
    conf = service / "conf" / "app.conf"
    store = ContentStore(str(tmp_path / "store"))
    kept = snapshot.capture(str(conf), store)
    conf.unlink()
    os.link(str(vault / "shadow"), str(conf))
    after = snapshot.capture(str(conf), store)
    assert "digest" not in after and "2 hard links" in after["unkept"], after
    assert b"TOCTOU-MARKER" not in b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    ok, note = snapshot.restore(str(conf), kept, store)  # rename over the name: the root-only file keeps its bytes
    _vault_untouched(vault)
    assert os.stat(vault / "shadow").st_nlink == 1
    assert ok and conf.read_bytes() == b"workers 2\n", note


def test_a_fifo_in_the_target_s_place_fails_the_copy_without_hanging(host, staged):
    service, _vault = host
    (service / "conf" / "app.conf").unlink()
    os.mkfifo(str(service / "conf" / "app.conf"))
    result = _restore(service, staged)
    # without a reader a FIFO cannot be opened for writing without blocking (ENXIO); with one, it is not a file
    assert result["rc"] == 1 and ("not a regular file" in result["stderr"] or "No such device" in result["stderr"]), result
    assert stat.S_ISFIFO(os.lstat(service / "conf" / "app.conf").st_mode)
