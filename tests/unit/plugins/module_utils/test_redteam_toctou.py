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
    held_path, known_good, landlock, plan_runner, snapshot)
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
    with pytest.raises(held_path.UnsafePath, match="which belongs to uid 4242"):
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


# ---------------------------------------------------------------- 4. the undo puts links and directories back


def _vault_exactly(vault: Path) -> dict:
    """Every entry of the root-only directory: kind, mode, owner, bytes or link target."""
    found = {}
    for path in sorted(vault.rglob("*")):
        info = os.lstat(path)
        found[str(path.relative_to(vault))] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_uid,
                                               info.st_gid, os.readlink(path) if path.is_symlink() else
                                               path.read_bytes() if path.is_file() else None)
    return found


# What a command changed in the service's conf directory, and the state the undo puts back: a link
# it removed, a directory it removed, a file it created, a directory it created (with a file in it).
_UNDONE = {
    "link": ("current", lambda conf: os.symlink("app.conf", str(conf / "current")), lambda conf: (conf / "current").unlink()),
    "directory": ("sites", lambda conf: (conf / "sites").mkdir(mode=0o750), lambda conf: (conf / "sites").rmdir()),
    "created file": ("app.conf", lambda conf: (conf / "app.conf").unlink(), lambda conf: (conf / "app.conf").write_bytes(b"x\n")),
    "created directory": ("made", lambda conf: None,
                          lambda conf: ((conf / "made").mkdir(), (conf / "made" / "app.conf").write_bytes(b"x\n"))),
}


@pytest.fixture()
def undone(host, tmp_path):
    """``(service, vault, path, kept, store)`` per scenario: the state kept before the command, the
    command's change made; the root-only directory holds an entry of the same name as each."""
    service, vault = host
    (vault / "current").write_bytes(SECRET)
    (vault / "sites").mkdir(mode=0o700)
    (vault / "sites" / "default").write_bytes(SECRET)
    (vault / "made").mkdir(mode=0o700)
    (vault / "made" / "app.conf").write_bytes(SECRET)
    store = ContentStore(str(tmp_path / "state" / "content"))

    def make(scenario):
        name, before, command = _UNDONE[scenario]
        conf = service / "conf"
        before(conf)
        kept = snapshot.capture(str(conf / name), store)
        command(conf)
        return str(conf / name), kept
    return service, vault, store, make


@pytest.mark.parametrize("scenario", sorted(_UNDONE))
def test_an_undo_never_changes_where_a_directory_swapped_after_its_check_points(undone, monkeypatch, scenario):
    service, vault, store, make = undone
    path, kept = make(scenario)
    before = _vault_exactly(vault)
    checked = snapshot.planted_link

    def check_then_swap(where):  # the check finds the real directory; the account swaps it right after
        why = checked(where)
        if not (service / "conf.old").exists():
            _swap_conf_for_link(service, vault)
        return why
    monkeypatch.setattr(snapshot, "planted_link", check_then_swap)
    ok, note = snapshot.restore(path, kept, store)
    assert _vault_exactly(vault) == before
    assert not ok and "not put back" in note and "uid 4242" in note, note


@pytest.mark.parametrize("scenario", sorted(_UNDONE))
def test_an_undo_puts_back_in_the_directory_it_held_when_the_name_is_swapped_after(undone, monkeypatch, scenario):
    service, vault, store, make = undone
    path, kept = make(scenario)
    before = _vault_exactly(vault)
    monkeypatch.setattr(snapshot, "_between_check_and_use", lambda _path: _swap_conf_for_link(service, vault))
    ok, note = snapshot.restore(path, kept, store)
    assert _vault_exactly(vault) == before
    # the directory that was held, now under the name the account moved it to, is the one put back
    moved = os.path.join(str(service / "conf.old"), os.path.basename(path))
    assert snapshot.same(snapshot.capture(moved, None), kept), snapshot.capture(moved, None)
    assert not ok, note  # read back by name, the path is now the account's link: not what was kept


def test_a_known_good_read_never_follows_a_directory_swapped_after_its_check(host, monkeypatch):
    service, vault = host
    conf = str(service / "conf" / "app.conf")
    checked = known_good.planted_link

    def check_then_swap(path):
        why = checked(path)
        if not (service / "conf.old").exists():
            _swap_conf_for_link(service, vault)
        return why
    monkeypatch.setattr(known_good, "planted_link", check_then_swap)
    links = {}
    found = known_good.fingerprint([conf], links)
    # the root-only file of the same name is neither hashed into the baseline nor read for a diff
    assert found == {} and "uid 4242" in links[conf], (found, links)
    with pytest.raises(OSError, match="uid 4242"):
        known_good._read_bytes(conf)
    _vault_untouched(vault)
