# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What opening paths one component at a time (held_path) costs per command (BENCHMARKS.md).

The plan runner of this checkout and of a baseline checkout (another worktree, e.g. main before
held_path) run the same three commands as root on this machine, each with its path kept first
by a snapshot session and confined with Landlock (``required``): the known-good restore
(``cp -p`` of a staged copy over a 4 KiB file), a ``truncate`` of a declared file, and a ``touch``
in a kept directory of 20 files; then, without a command, the undo of a link, of a removed directory
of 20 files and of a created one (snapshot.restore), and the known-good hash of 20 files. Each checkout runs in its own process, alternately, ROUNDS times;
the figure is the median wall time of ``run_plan`` per command in milliseconds, and the difference.
Needs root (snapshots keep owners) and a kernel with Landlock.

    sudo python bench/held_path_cost.py --baseline /work/main [--rounds 200]
"""
from __future__ import annotations

import sys
from pathlib import Path

import checkout_compare  # bench/: the two checkouts timed alternately

REPO = Path(__file__).resolve().parents[1]

_PROBE = r"""
import json, os, shutil, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.sentinel.remediation.plugins.module_utils import plan_runner, snapshot
rounds, work = int(sys.argv[2]), sys.argv[3]
conf = os.path.join(work, "etc", "app")
os.makedirs(conf, exist_ok=True)
staged = os.path.join(work, "staged.conf")
with open(staged, "wb") as handle:
    handle.write(b"y" * 4096)
target = os.path.join(conf, "app.conf")
def reset():
    shutil.rmtree(conf)
    os.makedirs(conf)
    for index in range(20):
        with open(os.path.join(conf, "%d.conf" % index), "wb") as handle:
            handle.write(b"x" * 4096)
    with open(target, "wb") as handle:
        handle.write(b"x" * 4096)
cases = {
    "restore (cp -p)": {"argv": ["cp", "-p", staged, target], "become": True,
                        "confine": {"write": [target], "exec": ["cp"]}, "keep": [{"path": target, "tree": False}]},
    "truncate a declared file": {"argv": ["truncate", "-s", "0", target], "become": True,
                                 "confine": {"write": [target], "exec": ["truncate"]},
                                 "keep": [{"path": target, "tree": False}]},
    "touch in a kept tree of 20": {"argv": ["touch", os.path.join(conf, "new.conf")], "become": True,
                                   "confine": {"create": [conf], "exec": ["touch"]}, "keep": [{"path": conf}]},
}
me = plan_runner.invoking_identity({})
times = {name: [] for name in cases}
for number in range(rounds):
    for name, command in cases.items():
        reset()
        plan = plan_runner.normalise_commands([command])
        session = snapshot.Session(os.path.join(work, "state"), "bench-1", number + 1, 10 ** 9, 3600)
        started = time.perf_counter()
        result = plan_runner.run_plan(plan, {}, me, confinement="required", snapshots=session)["results"][0]
        times[name].append((time.perf_counter() - started) * 1000)
        assert result["rc"] == 0 and result["confined"], result
# The undo and the known-good baseline, without a command: snapshot.restore of a link, of a removed
# directory of 20 files, and of a directory of 20 files a command created (removed); the known-good
# hash of 20 files.
from ansible_collections.sentinel.remediation.plugins.module_utils import known_good
from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import ContentStore
store = ContentStore(os.path.join(work, "state", "content"))
link, made = os.path.join(conf, "current"), os.path.join(work, "etc", "made")
def undo_link():
    os.symlink("0.conf", link)
    kept = snapshot.capture(link, store)
    os.unlink(link)
    os.symlink("1.conf", link)
    return link, kept
def undo_tree():
    kept = snapshot.capture(conf, store)
    shutil.rmtree(conf)
    return conf, kept
def undo_created():
    shutil.rmtree(made, ignore_errors=True)
    kept = snapshot.capture(made, store)
    os.makedirs(made)
    for index in range(20):
        with open(os.path.join(made, "%d.conf" % index), "wb") as handle:
            handle.write(b"z" * 4096)
    return made, kept
undos = {"undo: a link put back": undo_link, "undo: a removed tree of 20 files put back": undo_tree,
         "undo: a created tree of 20 files removed": undo_created}
for name in list(undos) + ["known-good: 20 files hashed"]:
    times[name] = []
files = [os.path.join(conf, "%d.conf" % index) for index in range(20)]
for number in range(rounds):
    for name, prepare in undos.items():
        reset()
        path, kept = prepare()
        started = time.perf_counter()
        ok, note = snapshot.restore(path, kept, store)
        times[name].append((time.perf_counter() - started) * 1000)
        assert ok, note
    started = time.perf_counter()
    assert len(known_good.fingerprint(files)) == 20
    times["known-good: 20 files hashed"].append((time.perf_counter() - started) * 1000)
print(json.dumps({name: statistics.median(values) for name, values in times.items()}))
"""


def main() -> int:
    return checkout_compare.compare(__doc__.split("\n", 1)[0], _PROBE, REPO, 'a checkout without held_path (e.g. main)',
                                    ('command', 'baseline median (ms)', 'held_path median (ms)', 'added per command (ms)'))


if __name__ == "__main__":
    sys.exit(main())
