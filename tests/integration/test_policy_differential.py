"""Differential test: what the engine accepts is exactly what bash would run.

One lab container (no network). Harmless stand-ins are the only programs on PATH;
each records its own name and argv. Every command the engine allows or gates
behind approval is fed, as the ORIGINAL string, to ``bash -c`` in the container;
bash must have run exactly one program, with exactly the words the engine read, and the
engine's argv must be those words less the proposal's ``sudo`` (the engine decides
privilege) plus only the safe flags it adds (``--no-pager`` ...) or its ``runuser``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import parse_command

pytestmark = pytest.mark.lab

IMAGE = "sentinel-lab:latest"
NAME = "-".join(filter(None, [os.environ.get("SENTINEL_LAB_NAMESPACE"), "sentinel-test-policy-diff"]))
STANDIN_DIR = "/opt/policy-standins"

# Records one JSON line per program start; never runs anything else.
STANDIN = """#!/usr/bin/python3
import json, os, sys
with open(os.environ["STANDIN_LOG"], "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
"""

# Runs each command through bash with only the stand-ins on PATH; prints the records.
RUNNER = """
import json, os, subprocess, sys, tempfile
results = []
for command in json.load(sys.stdin):
    fd, log = tempfile.mkstemp()
    os.close(fd)
    env = {"PATH": "%(dir)s", "STANDIN_LOG": log, "BASH_ENV": "%(dir)s/.bash_env"}
    proc = subprocess.run(["/bin/bash", "-c", command], env=env, cwd="/tmp",
                          capture_output=True, text=True, timeout=10)
    with open(log) as handle:
        runs = [json.loads(line) for line in handle if line.strip()]
    os.unlink(log)
    results.append({"command": command, "runs": runs, "rc": proc.returncode, "stderr": proc.stderr[-300:]})
json.dump(results, sys.stdout)
""" % {"dir": STANDIN_DIR}


def _docker(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True, check=check, timeout=120)


def _unit_cases() -> tuple[list[str], list[str]]:
    path = Path(__file__).resolve().parents[1] / "unit" / "plugins" / "plugin_utils" / "test_policy.py"
    spec = importlib.util.spec_from_file_location("_policy_cases", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [case[0] for case in module.ALLOWED], [case[0] for case in module.APPROVAL]


@pytest.fixture(scope="module")
def container() -> Iterator[str]:
    if shutil.which("docker") is None:
        pytest.skip("docker CLI not found; the differential test needs the lab image")
    if _docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.skip(f"image {IMAGE} not found; build the lab first (scripts/setup)")
    _docker("rm", "-f", NAME, check=False)
    _docker("run", "-d", "--init", "--network", "none", "--name", NAME, IMAGE)
    try:
        names = set(load_policy()["tools"]) | set(load_policy()["wrappers"]) | {"sudo", "id", "runuser"}
        links = " ".join(f"ln -sf standin {STANDIN_DIR}/{name};" for name in sorted(names))
        setup = (
            f"mkdir -p {STANDIN_DIR} && cat > {STANDIN_DIR}/standin && chmod 755 {STANDIN_DIR}/standin && "
            f"cd {STANDIN_DIR} && {links} "
            # kill is a bash builtin: disable it so bash looks the program up on PATH.
            f"echo 'enable -n kill' > {STANDIN_DIR}/.bash_env"
        )
        _docker("exec", "-i", NAME, "sh", "-c", setup, stdin=STANDIN)
        yield NAME
    finally:
        _docker("rm", "-f", NAME, check=False)


def _run_in_bash(name: str, commands: list[str]) -> list[dict]:
    proc = _docker("exec", "-i", NAME, "python3", "-c", RUNNER, stdin=json.dumps(commands))
    return json.loads(proc.stdout)


# Flags the engine adds itself right after the tool name.
ENGINE_FLAGS = {"--no-pager", "--no-ask-password", "--nopager"}


def _engine_core(argv: list[str], words: list[str]) -> list[str]:
    """The engine's argv without what the engine itself added (runuser, safe flags)."""
    if argv[:1] == ["runuser"]:
        argv = argv[argv.index("--") + 1:]
    core = list(argv)
    for flag in ENGINE_FLAGS:
        for _extra in range(core.count(flag) - words.count(flag)):
            core.remove(flag)
    return core


def test_bash_runs_exactly_the_engine_words(container: str) -> None:
    allowed, approval = _unit_cases()
    verdicts = {c: classify(c) for c in allowed + approval}
    accepted = [c for c, v in verdicts.items() if v["argv"] is not None and "/" not in v["argv"][0]]
    assert len(accepted) >= len(allowed) + len(approval) - 3
    mismatches = []
    for result in _run_in_bash(container, accepted):
        command = result["command"]
        words = parse_command(command).argv or []
        core = _engine_core(verdicts[command]["argv"], words)
        if result["runs"] != [words] or words[len(words) - len(core):] != core:
            mismatches.append((command, words, core, result["runs"], result["stderr"]))
    assert not mismatches, "\n".join(map(repr, mismatches))


def test_harness_notices_a_second_program(container: str) -> None:
    # Sanity check of the harness itself: these run two programs in bash, and the
    # engine rejects them.
    commands = ["ps aux && id", "ps aux; id", "ps $(id)"]
    for result in _run_in_bash(container, commands):
        assert len(result["runs"]) == 2, result
        assert classify(result["command"])["verdict"] == "reject"
