# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A state directory is refused when another account owns, or may write to, it or a directory above
it; real directories, their modes and owners set here (as root), on both sides: the host's content
store and snapshot session, and the controller's state directory."""
from __future__ import annotations

import grp
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore, ContentStoreError
from ansible_collections.sentinel.remediation.plugins.module_utils.state_directory import exposure
from ansible_collections.sentinel.remediation.plugins.plugin_utils import state_dir

OTHER = 4242        # an account that is not this process's
NO_GROUP = 4243     # a group the host cannot name: counted as having other members

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another account needs root")


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """``<tmp>/top/mid/state``, each directory root's and 0755 (the state directory 0700)."""
    state = tmp_path / "top" / "mid" / "state"
    state.mkdir(parents=True)
    for path in (tmp_path / "top", tmp_path / "top" / "mid"):
        path.chmod(0o755)
    state.chmod(0o700)
    return state


def _set(path: Path, mode: int | None = None, uid: int | None = None, gid: int | None = None) -> None:
    if uid is not None or gid is not None:
        os.lchown(path, -1 if uid is None else uid, -1 if gid is None else gid)
    if mode is not None:
        path.chmod(mode)


# What is wrong, where, and the words the refusal names it with.
CASES = {
    "the state directory writable by a group with another member": (
        lambda s: _set(s, 0o770, gid=NO_GROUP), "state", "group gid 4243 may write to it (mode 0770)"),
    "the state directory another account's": (
        lambda s: _set(s, uid=OTHER), "state", "belongs to uid 4242, not to root or this user"),
    "the state directory writable by every user": (
        lambda s: _set(s, 0o1777), "state", "every user may write to it (mode 1777)"),
    "a directory above writable by a group with another member": (
        lambda s: _set(s.parent.parent, 0o775, gid=NO_GROUP), "top", "group gid 4243 may write to it (mode 0775)"),
    "a directory above another account's": (
        lambda s: _set(s.parent, uid=OTHER), "mid", "belongs to uid 4242"),
    "a directory above writable by every user, not sticky": (
        lambda s: _set(s.parent, 0o777), "mid", "every user may write to it (mode 0777)"),
    "a sticky directory above holding another account's entry": (
        lambda s: (_set(s.parent.parent, 0o1777), _set(s.parent, uid=OTHER)), "top",
        "every user may write to it (mode 1777), and the entry the path goes through in it belongs to uid 4242"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_state_directory_another_account_could_change_is_refused_naming_where_and_why(tree, case):
    spoil, where, words = CASES[case]
    assert exposure(str(tree)) == ""
    spoil(tree)
    named = {"state": tree, "mid": tree.parent, "top": tree.parent.parent}[where]
    why = exposure(str(tree))
    assert why.startswith((f"{named}: {words}", f"{named} {words}")), why


def test_a_sticky_directory_every_user_may_write_is_accepted_above_an_entry_of_ours(tree):
    _set(tree.parent.parent, 0o1777)  # as /tmp
    assert exposure(str(tree)) == ""


def test_a_link_on_the_way_must_be_root_s_or_ours_and_is_followed(tree, tmp_path):
    link = tmp_path / "via"
    os.symlink(str(tree.parent), str(link))
    assert exposure(str(link / "state")) == ""
    os.lchown(link, OTHER, OTHER)
    assert exposure(str(link / "state")) == f"{link} is a symbolic link owned by uid 4242, not by root or this user"
    os.lchown(link, 0, 0)
    _set(tree.parent, 0o777)  # where it leads is examined too
    assert exposure(str(link / "state")).startswith(f"{tree.parent}: every user may write")


def test_a_group_whose_only_member_is_this_user_may_write():
    me = pwd.getpwuid(os.geteuid()).pw_name
    group = grp.getgrgid(os.getegid())
    others = [m for m in group.gr_mem if m != me]
    others += [p.pw_name for p in pwd.getpwall() if p.pw_gid == group.gr_gid and p.pw_uid != os.geteuid()]
    if others:
        pytest.skip(f"group {group.gr_name} has other members here: {others}")
    from ansible_collections.sentinel.remediation.plugins.module_utils import directory_writers
    assert not directory_writers.group_has_others(group.gr_gid, os.geteuid())


def _exposure_as(uid: int, groups: list[int], path: Path) -> str:
    """``exposure(path)`` as seen by a process of account ``uid`` holding ``groups`` (a fork that
    gives up root), as an execution environment's job user sees its volume."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read)
            os.setgroups(groups)
            os.setgid(groups[0])
            os.setuid(uid)
            os.write(write, exposure(str(path)).encode() or b"-")
        except Exception as exc:  # pylint: disable=broad-except
            os.write(write, f"raised {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(child, 0)
    return "" if said == "-" else said


def test_a_volume_group_the_job_holds_and_no_database_names_may_write():
    """A Kubernetes volume with an fsGroup: the volume's root is root's, group-writable, setgid,
    for a group no group database in the image names; the job's account holds that group. Only
    accounts holding it may write there, and the job is the one it was given to."""
    base = Path(tempfile.mkdtemp(prefix="sentinel-volume-", dir="/tmp"))   # reachable by other accounts
    try:
        base.chmod(0o755)
        volume, mid, tree = base / "volume", base / "volume" / "job", base / "volume" / "job" / "state"
        tree.mkdir(parents=True)
        _set(volume, 0o2775, gid=NO_GROUP)
        _set(mid, 0o2775, uid=OTHER, gid=NO_GROUP)
        _set(tree, 0o700, uid=OTHER, gid=NO_GROUP)
        _volume_checks(volume, tree)
    finally:
        shutil.rmtree(base)


def _volume_checks(volume: Path, tree: Path) -> None:
    assert _exposure_as(OTHER, [NO_GROUP], tree) == ""
    # Another account, not holding the group, cannot vouch for who else may write there.
    assert _exposure_as(OTHER + 1, [NO_GROUP + 1], volume) == (
        f"{volume}: group gid {NO_GROUP} may write to it (mode 2775) and has members other than this user")


def test_root_in_a_group_is_not_another_writer():
    """Root may write anywhere already: root as the only other member of a writable group adds nothing."""
    from ansible_collections.sentinel.remediation.plugins.module_utils import directory_writers
    others = [p.pw_name for p in pwd.getpwall() if p.pw_gid == 0 and p.pw_uid != 0]
    others += [m for m in grp.getgrgid(0).gr_mem if m != "root"]
    if others:
        pytest.skip(f"group 0 has other members here: {others}")
    assert not directory_writers.group_has_others(0, OTHER)
    assert directory_writers.group_has_others(NO_GROUP, OTHER)   # unnamed and not held: unknown


# ---------------------------------------------------------------- the host: content store, snapshots


def test_the_host_store_is_refused_under_a_directory_another_account_may_write(tree):
    _set(tree.parent, 0o775, gid=NO_GROUP)
    with pytest.raises(ContentStoreError) as caught:
        ContentStore(str(tree / "content"))
    assert str(caught.value) == (f"content store {tree / 'content'} cannot be trusted: {tree.parent}: group gid 4243 "
                                 "may write to it (mode 0775) and has members other than this user")
    # a snapshot session says so for every path declared to it, and no path is kept
    session, why = snapshot.open_session({"dir": str(tree), "incident": "inc-1", "max_bytes": 10 ** 6,
                                          "max_age": 3600})
    assert f"{tree.parent}: group gid 4243 may write" in why
    assert session.keep([{"path": "/etc/hostname"}]) and session.entries == []


def test_the_host_store_is_refused_when_its_root_is_another_account_s(tree):
    _set(tree, uid=OTHER)
    with pytest.raises(ContentStoreError, match=f"{tree}: .*belongs to uid 4242|{tree} belongs to uid 4242"):
        ContentStore(str(tree / "content"))
    assert not (tree / "content").exists() or os.lstat(tree / "content").st_uid == 0


# ---------------------------------------------------------------- the controller's state directory


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_controller_state_directory_is_refused_with_a_message_naming_it(tree, case):
    spoil, where, words = CASES[case]
    spoil(tree)
    named = {"state": tree, "mid": tree.parent, "top": tree.parent.parent}[where]
    with pytest.raises(state_dir.StateDirError) as caught:
        state_dir.ensure_writable(str(tree))
    message = str(caught.value)
    assert message.startswith(f"the state directory {tree} (remediate_artifacts_dir) cannot be trusted: {named}")
    assert words in message and "Traceback" not in message


def test_the_controller_state_directory_of_this_user_under_private_directories_is_used(tree):
    assert state_dir.ensure_writable(str(tree / "remediation")) == str(tree / "remediation")
