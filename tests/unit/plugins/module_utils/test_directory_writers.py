# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rule for "may another account change names in this directory", asked by both its users: the
links root follows (planted_links, held_path) and the state directories (state_directory). Real
directories with real modes and owners; the group and account databases are the host's own files,
replaced for one probe process by bind mounts in a private mount namespace (``unshare -m``), so a
group's members are what the case says and nothing on the machine changes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

COLLECTIONS = Path(__file__).resolve().parents[4] / ".collections"
SERVICE = 4242      # an account that is not this process's
GROUP = 4250        # the directory's group, named or not as the case says

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="directories of other accounts and a mount namespace need root"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)"),
]

# In the private namespace: the databases bind-mounted over, the groups this process holds set, then
# each user of the rule asked about the same directory.
_PROBE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.sentinel.remediation.plugins.module_utils import held_path
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link
from ansible_collections.sentinel.remediation.plugins.module_utils.state_directory import exposure
directory, held = sys.argv[2], json.loads(sys.argv[3])
os.setgroups(held)
def opened(path):
    try:
        os.close(held_path.open_file(path))
    except held_path.UnsafePath as exc:
        return str(exc)
    return ""
print(json.dumps({"link": planted_link(os.path.join(directory, "link")),
                  "held link": opened(os.path.join(directory, "link")),
                  "hard link": planted_link(os.path.join(directory, "twice")),
                  "held hard link": opened(os.path.join(directory, "twice")),
                  "state": exposure(os.path.join(directory, "state"))}))
"""


def _databases(tmp_path: Path, group_line: str | None, accounts: list[str]) -> tuple[Path, Path]:
    group, passwd = tmp_path / "group", tmp_path / "passwd"
    group.write_text(Path("/etc/group").read_text() + (group_line + "\n" if group_line else ""))
    passwd.write_text(Path("/etc/passwd").read_text() + "".join(line + "\n" for line in accounts))
    return group, passwd


def _verdicts(tmp_path: Path, mode: int, group_line: str | None = None, accounts: list[str] = (),
              held: list[int] = (0,), state_owner: int = 0) -> dict:
    """What each user of the rule says of ``<tmp>/dir`` (root's, group GROUP, ``mode``) holding a
    link of root's, a file with two names and a state directory (0700, ``state_owner``'s)."""
    directory = tmp_path / "dir"
    directory.mkdir()
    (tmp_path / "target").write_bytes(b"x")
    os.symlink("../target", str(directory / "link"))
    os.link(str(tmp_path / "target"), str(directory / "twice"))
    (directory / "state").mkdir(mode=0o700)
    os.chown(directory / "state", state_owner, 0)
    os.chown(directory, 0, GROUP)
    os.chmod(directory, mode)
    group, passwd = _databases(tmp_path, group_line, list(accounts))
    script = ('mount --bind "$1" /etc/group && mount --bind "$2" /etc/passwd && shift 2 && exec "$@"')
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "probe", str(group),
                           str(passwd), sys.executable, "-c", _PROBE, str(COLLECTIONS), str(directory),
                           json.dumps(list(held))], capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _trusted_throughout(found: dict) -> bool:
    return not any(found.values())


def _refused_throughout(found: dict, words: str) -> bool:
    return all(words in why for why in found.values())


SVC = f"svc:x:{SERVICE}:{SERVICE}::/nonexistent:/usr/sbin/nologin"

# The directory group-writable (0775): whether another account acts with the group's rights.
GROUP_CASES = {
    # a group with no members at all: only root and the directory's owner write there (planted_links
    # refused it before: any non-root group counted)
    "a named group without members": (f"sentx:x:{GROUP}:", [], [0], False),
    # root may write anywhere already (planted_links refused it before)
    "a named group whose only member is root": (f"sentx:x:{GROUP}:root", [], [0], False),
    # another account with uid 0 is root by another name (state_directory refused it before: only the
    # name "root" was excepted)
    "a named group whose member is another name of uid 0": (
        f"sentx:x:{GROUP}:toor", ["toor:x:0:0::/root:/bin/sh"], [0], False),
    "a named group with another account as a member": (f"sentx:x:{GROUP}:svc", [SVC], [0], True),
    "a named group that is another account's primary group": (
        f"sentx:x:{GROUP}:", [f"svc:x:{SERVICE}:{GROUP}::/nonexistent:/usr/sbin/nologin"], [0], True),
    "a named group whose member no account answers to": (f"sentx:x:{GROUP}:ghost", [], [0], True),
    "a group the host cannot name, not held": (None, [], [0], True),
    # a container volume's group (Kubernetes fsGroup) the process was given (state_directory refused
    # it for root before; planted_links refused it for everyone)
    "a group the host cannot name, held by this process": (None, [], [0, GROUP], False),
}


@pytest.mark.parametrize("case", sorted(GROUP_CASES))
def test_a_group_writable_directory_is_judged_alike_by_links_and_state_directories(tmp_path, case):
    group_line, accounts, held, refused = GROUP_CASES[case]
    found = _verdicts(tmp_path, 0o775, group_line, accounts, held)
    if refused:
        assert _refused_throughout(found, "may write to it (mode 0775) and has members other than this user"), found
    else:
        assert _trusted_throughout(found), found


def test_every_user_writing_without_sticky_is_refused_by_both(tmp_path):
    found = _verdicts(tmp_path, 0o777, f"sentx:x:{GROUP}:")
    assert _refused_throughout(found, "every user may write to it (mode 0777)"), found


def test_sticky_protects_entries_of_ours_but_not_a_second_name_nor_another_account_s_entry(tmp_path):
    found = _verdicts(tmp_path, 0o1777, f"sentx:x:{GROUP}:")
    # root's own link and a state directory of root's: no other account may rename or remove them
    assert found["link"] == found["held link"] == found["state"] == "", found
    # a file with two names: the name may be another account's even though the file is root's (the
    # sticky bit keeps others from removing names, not from adding them; planted_links trusted it before)
    assert "sticky keeps others from removing names, not from adding them" in found["hard link"], found
    assert found["held hard link"] == found["hard link"], found


def test_sticky_does_not_protect_a_state_directory_another_account_owns_there(tmp_path):
    found = _verdicts(tmp_path, 0o1777, f"sentx:x:{GROUP}:", state_owner=SERVICE)
    assert "the entry the path goes through in it belongs to uid 4242" in found["state"], found
