# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run one of the collection's host modules ad hoc on a lab container, as the role runs it:
real ``ansible`` through the docker connection, as user sentinel, with become unless told
otherwise. The one copy for every lab test that calls a module directly."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = str(Path(sys.executable).parent / "ansible")


def run_host_module(container: str, name: str, args: dict, *, become: bool = True, check_mode: bool = False,
                    timeout: float = 180, unset_env: Iterable[str] = ()) -> dict:
    """sentinel.remediation.NAME on CONTAINER; the host's result. A failed or unreachable host, or
    no result at all, is an AssertionError carrying what ansible said. ``unset_env`` names
    variables of this process the module run must not see."""
    argv = [ANSIBLE, "all", "-i", f"{container},", "-c", "community.docker.docker", "-u", "sentinel",
            "-m", f"sentinel.remediation.{name}", "-a", json.dumps(args)]
    if become:
        argv.append("-b")
    if check_mode:
        argv.append("--check")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    for variable in unset_env:
        env.pop(variable, None)
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"][container]
    except (ValueError, KeyError, IndexError) as exc:
        raise AssertionError(f"ansible gave no result ({exc}): {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}") from None
    assert not result.get("failed") and not result.get("unreachable"), result
    return result
