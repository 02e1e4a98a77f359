# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team on the lab, stop 37: check-then-use on the host, with a swap at the worst moment.

The host's own code (plugins/module_utils) runs in one lab container as root, as execute_plan runs
it: the plan runner with a snapshot session. A directory of the service's account (redis) holds the
file a command is about. At the moment another account would pick (after every check of the
command, just before it runs; or after a declared path's check, before its Landlock rule is made),
the code's seam hands over to the account, which swaps a path: its directory for a link to a
root-only one, the file for a link to /etc/shadow, or the file for a hard link to /etc/shadow
(made as root: the lab kernel's fs.protected_hardlinks stops the account, not every host's does).
Then, from inside the container and by another program than the one under test, every regular
file under /etc, /root and /srv is compared with what it was (inode, mode, owner, SHA-256): only
the file the command is about may differ."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from workflow_support import require_docker

pytestmark = [pytest.mark.lab]

REPO = Path(__file__).resolve().parents[2]
PROBE_DIR = "/tmp/toctou-probe"
SERVICE = "/srv/app"
TARGET = f"{SERVICE}/conf/app.conf"
STAGED = "/var/lib/sentinel-remediation/known-good/restore/staged-app.conf"
SAVED_SHADOW = "/root/shadow.toctou-saved"

# Every regular file under the trees another account's swap could point root at, by inode (a swap
# moves names, not files): mode, owner and SHA-256. Written for the test, not the code under test.
_SURVEY = r"""
import hashlib, json, os, sys
out = {}
for top in ("/etc", "/root", "/srv"):
    for here, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(here, name)
            try:
                info = os.lstat(path)
                if not os.path.isfile(path) or os.path.islink(path):
                    continue
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                continue
            out[str(info.st_ino)] = [path, oct(info.st_mode), info.st_uid, info.st_gid, digest]
print(json.dumps(out))
"""

# The scenario, run as root with the host code; the swap is made at the seam, as the service's
# account (``su redis``) or, for a hard link, as root standing in for a host without protected_hardlinks.
_PROBE = r"""
import json, os, subprocess, sys
sys.path.insert(0, "/tmp/toctou-probe")
from ansible_collections.sentinel.remediation.plugins.module_utils import landlock, plan_runner, snapshot
scenario, target, staged, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
conf = os.path.dirname(target)

def as_service(script):
    subprocess.run(["su", "-s", "/bin/sh", "redis", "-c", script], check=True)

swaps = {
    "directory": lambda: as_service("mv %s %s.old && ln -s /root/vault %s" % (conf, conf, conf)),
    "symlink": lambda: as_service("rm -f %s && ln -s /etc/shadow %s" % (target, target)),
    "hard link": lambda: (os.unlink(target), os.link("/etc/shadow", target)),
}
kind, _sep, swap = scenario.partition(":")
done = []
def seam(*_args):
    if swap and not done:
        done.append(swap)
        swaps[swap]()
session = snapshot.Session(None, "toctou-1", 1, 10 ** 8, 3600)
if kind == "restore":
    command = {"argv": ["cp", "-p", staged, target], "become": True, "approved": True,
               "confine": {"write": [target], "exec": ["cp"]}, "keep": [{"path": target}]}
    plan_runner._between_check_and_use = seam  # after every check of the command, before it runs
elif kind == "write":
    command = {"argv": ["truncate", "-s", "0", target], "become": True, "approved": True,
               "confine": {"write": [target], "exec": ["truncate"]}}
    landlock._between_check_and_use = seam  # after the path's check, before its rule is made
else:  # keep: a directory kept whole before a command that adds a file to it
    command = {"argv": ["touch", conf + "/new.conf"], "become": True,
               "confine": {"create": [conf], "exec": ["touch"]}, "keep": [{"path": conf, "tree": True}]}
plan = plan_runner.normalise_commands([command])
result = plan_runner.run_plan(plan, {}, plan_runner.invoking_identity({}), confinement=mode,
                              snapshots=session, timeout=20)["results"][0]
record = snapshot.settle(session, "", None, False)
print(json.dumps({"result": result, "swapped": done, "unkept": record["unkept"]}))
"""


def _sh(container: str, script: str, check: bool = True) -> str:
    proc = subprocess.run(["docker", "exec", container, "sh", "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script!r} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def _survey(container: str) -> dict:
    return json.loads(subprocess.run(["docker", "exec", container, "python3", "-c", _SURVEY], capture_output=True,
                                     text=True, timeout=120, check=True).stdout)


@pytest.fixture(scope="module")
def host(lab_factory):
    """One lab host with the host code copied in (as the benchmarks do) and the scenario's files."""
    require_docker()
    lab = lab_factory("sentinel-test-toctou", 1)
    container = lab.container(lab.hosts()[0])
    base = f"{PROBE_DIR}/ansible_collections/sentinel/remediation/plugins"
    _sh(container, f"rm -rf {PROBE_DIR} && mkdir -p {base}")
    subprocess.run(["docker", "cp", str(REPO / "plugins" / "module_utils"), f"{container}:{base}/module_utils"],
                   check=True, timeout=120)
    _sh(container, f"cd {PROBE_DIR} && for d in ansible_collections ansible_collections/sentinel "
                   "ansible_collections/sentinel/remediation ansible_collections/sentinel/remediation/plugins; "
                   "do touch $d/__init__.py; done")
    _sh(container, f"id redis && cp -p /etc/shadow {SAVED_SHADOW}")
    yield container
    _sh(container, f"rm -rf {PROBE_DIR} {SERVICE} /root/vault /var/lib/sentinel-remediation {SAVED_SHADOW}", check=False)


@pytest.fixture()
def scene(host):
    """The service's directory (redis's, 0750) with its configuration, a staged known-good copy
    (root's, as known_good stages it: root-only directories), a root-only directory holding a file
    of the same name; put back to that before each test."""
    _sh(host, f"rm -rf {SERVICE} /root/vault /var/lib/sentinel-remediation && "
              f"mkdir -p {SERVICE}/conf /root/vault $(dirname {STAGED}) && "
              "chmod 0700 /var/lib/sentinel-remediation /var/lib/sentinel-remediation/known-good "
              f"$(dirname {STAGED}) /root/vault && "
              f"printf 'workers 2\\n' > {TARGET} && chown -R redis:redis {SERVICE} && chmod 0750 {SERVICE}/conf && "
              f"printf 'vault\\n' > /root/vault/app.conf && "
              f"printf 'workers 4\\n' > {STAGED} && chown redis:redis {STAGED} && chmod 0640 {STAGED}")
    yield host
    # a second name of /etc/shadow goes first; a failing test's write through a link is put back
    _sh(host, f"rm -f {TARGET} {SERVICE}/conf/tls.conf; cmp -s {SAVED_SHADOW} /etc/shadow || "
              f"cp -p {SAVED_SHADOW} /etc/shadow", check=False)


def _run(container: str, scenario: str, confinement: str = "required") -> dict:
    proc = subprocess.run(["docker", "exec", container, "python3", "-c", _PROBE, scenario, TARGET, STAGED, confinement],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _changed(before: dict, after: dict) -> list:
    """The files whose bytes, mode or owner differ, or that are gone or new, by their path."""
    return sorted({entry[0] for inode, entry in before.items() if after.get(inode, [None])[1:] != entry[1:]}
                  | {entry[0] for inode, entry in after.items() if inode not in before})


def test_a_restore_without_a_swap_writes_the_target_only_as_cp_p_would(scene):
    before = _survey(scene)
    found = _run(scene, "restore")
    assert found["result"]["rc"] == 0 and found["result"]["held"], found
    assert _sh(scene, f"cat {TARGET}; stat -c '%a %U %G' {TARGET}") == "workers 4\n640 redis redis\n"
    assert _changed(before, _survey(scene)) == [TARGET]


# "off": what a host without Landlock does too (preferred mode runs an approved command unconfined)
@pytest.mark.parametrize("confinement", ["required", "off"])
@pytest.mark.parametrize("swap", ["directory", "symlink", "hard link"])
def test_the_known_good_restore_never_writes_where_a_swap_after_its_checks_points(scene, swap, confinement):
    before = _survey(scene)
    found = _run(scene, f"restore:{swap}", confinement)
    after = _survey(scene)
    assert found["swapped"] == [swap], found
    assert found["result"]["rc"] == 1 and found["result"]["reason"].startswith("refused:"), found
    assert _changed(before, after) in ([], [TARGET]), _changed(before, after)
    assert _sh(scene, "cat /root/vault/app.conf") == "vault\n"


def test_a_declared_write_path_swapped_before_its_landlock_rule_gets_no_rule(scene):
    before = _survey(scene)
    found = _run(scene, "write:symlink")
    assert found["swapped"] == ["symlink"], found
    assert found["result"]["skipped"] and "refused" in found["result"]["reason"], found
    assert _changed(before, _survey(scene)) in ([], [TARGET])


def test_a_hard_link_to_a_root_only_file_in_a_kept_tree_is_not_kept_and_the_record_says_so(scene):
    _sh(scene, f"ln /etc/shadow {SERVICE}/conf/tls.conf")
    before = _survey(scene)
    found = _run(scene, "keep")
    assert found["result"]["skipped"] and "needs a human's approval" in found["result"]["reason"], found
    assert any("tls.conf" in line and "hard links" in line for line in found["unkept"]), found
    assert _changed(before, _survey(scene)) == []
    # and the host's store holds no line of /etc/shadow
    assert _sh(scene, "grep -rqF -f /etc/shadow /var/lib/sentinel-remediation && echo found; true") == ""


# ---------------------------------------------------------------- the undo, raced by the account

# Root puts three entries of the service's conf directory back and forth between two kept states,
# round after round for some seconds (a link retargeted, a directory with a file made and removed, a file written and
# removed), as undo and rollback do, while the service's account (``su redis``) swaps that
# directory for a link to a root-only one in a loop of its own. No seam: a real race.
_RACE = r"""
import json, os, subprocess, sys, time
sys.path.insert(0, "/tmp/toctou-probe")
from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore
conf, seconds, stop = sys.argv[1], float(sys.argv[2]), sys.argv[3]
# The account's loop: its directory aside, a link to the root-only one in its place, then back.
# When root recreated the missing directory in between, root's is moved aside and the loop goes on.
RACER = '''
import os, sys
os.chdir(sys.argv[1])
n = 0
while not os.path.exists(sys.argv[2]):
    n += 1
    try:
        os.rename("conf", "conf.real")
        os.symlink("/root/vault", "conf")
        os.unlink("conf")
        os.rename("conf.real", "conf")
    except OSError:
        if os.path.isdir("conf.real"):
            if os.path.lexists("conf"):
                os.rename("conf", "root-made.%d" % n)
            os.rename("conf.real", "conf")
'''
store = ContentStore("/var/lib/sentinel-remediation/content")
link, sites, made = conf + "/current", conf + "/sites", conf + "/app.conf"
os.symlink("app.conf", link)
os.mkdir(sites, 0o750)
with open(sites + "/default", "w") as out:
    out.write("server {}\n")
kept = {p: [snapshot.capture(p, store)] for p in (link, sites, made)}
os.unlink(link)
os.symlink("other.conf", link)
os.unlink(sites + "/default")
os.rmdir(sites)
os.unlink(made)
for p in (link, sites, made):
    kept[p].append(snapshot.capture(p, store))
racer = subprocess.Popen(["su", "-s", "/usr/bin/python3", "redis", "-c", RACER, os.path.dirname(conf), stop],
                         stderr=subprocess.PIPE, text=True)
outcomes = {"rounds": 0, "restored": 0, "failed": 0, "why": []}
until = time.monotonic() + seconds
try:
    while time.monotonic() < until:
        n = outcomes["rounds"]
        outcomes["rounds"] += 1
        for p in (link, sites, made):
            ok, note = snapshot.restore(p, kept[p][n % 2], store)
            outcomes["restored" if ok else "failed"] += 1
            if not ok and len(outcomes["why"]) < 8 and note not in outcomes["why"]:
                outcomes["why"].append(note)
finally:
    open(stop, "w").close()
    outcomes["racer"] = racer.communicate(timeout=60)[1][-500:]
print(json.dumps(outcomes))
"""

# The root-only directory the account's link points at, entry by entry (kind, mode, owner, link
# target, SHA-256 of a file), read by find and sha256sum in the container, not by the code under test.
_VAULT = ("cd /root/vault && find . -printf '%p %y %m %U %G %l\\n' | sort && "
          "find . -type f -exec sha256sum {} + | sort")


def test_an_undo_raced_by_the_account_swapping_its_directory_changes_nothing_outside_it(scene):
    _sh(scene, "mkdir -m 0700 /root/vault/sites /root/vault/current && printf 'vault\\n' > /root/vault/sites/default "
               "&& printf 'vault\\n' > /root/vault/current/x && rm -f /tmp/race-stop")
    vault, before = _sh(scene, _VAULT), _survey(scene)
    proc = subprocess.run(["docker", "exec", scene, "python3", "-c", _RACE, f"{SERVICE}/conf", "5", "/tmp/race-stop"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout)
    assert _sh(scene, _VAULT) == vault, outcomes
    changed = _changed(before, _survey(scene))
    assert [p for p in changed if not p.startswith(f"{SERVICE}/")] == [], changed
    # a real race: some restores were done, others failed (the directory was the account's link, or gone)
    assert outcomes["restored"] and outcomes["failed"], json.dumps(outcomes)
