# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sentinel.remediation.jsonfile under real ansible-playbook runs: a full disk keeps the good
entry and the report says the memory was not saved; a corrupt entry is kept aside and the
run goes on. Asserted on the bytes in the cache directory and the report file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        sentinel_memory: "{{ memory }}"
        cacheable: true
    - ansible.builtin.set_stats:
        data:
          sentinel_remediation: [{service: nginx, state: healed, attempts: 1}]
        per_host: true
"""


def entry(cache: Path) -> Path:
    """The host's cache file (ansible-core names it with its schema prefix, e.g. s1_localhost)."""
    (found,) = [p for p in cache.iterdir() if p.name.endswith("localhost") and ".corrupt" not in p.name]
    return found


def playbook(tmp_path: Path, cache: Path, memory) -> tuple[subprocess.CompletedProcess, dict]:
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    report = tmp_path / "report.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache),
               SENTINEL_REPORT_JSON=str(report), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"memory": memory}))
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", str(play), "-e", f"@{extra}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return proc, (json.loads(report.read_text()) if report.exists() else {})


def test_round_trip(tmp_path):
    cache = tmp_path / "facts"
    proc, report = playbook(tmp_path, cache, ["episode"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "episode" in json.loads(entry(cache).read_text())["__payload__"]
    assert report["ok"] is True and report["errors"] == []


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=False,
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_keeps_the_good_entry_and_the_report_says_memory_was_lost(tmp_path, small_disk):
    proc, _report = playbook(tmp_path, small_disk, ["good episode"])
    assert proc.returncode == 0
    good = entry(small_disk).read_bytes()
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k", "count=64"], capture_output=True, check=False)
    proc, report = playbook(tmp_path, small_disk, ["x" * 20000])
    assert entry(small_disk).read_bytes() == good  # not a 0-byte or partial file
    assert [e["host"] for e in report["errors"]] == ["localhost"]
    assert "memory not saved" in report["errors"][0]["error"] and report["ok"] is False
    assert "memory not saved" in report["outcomes"][0]["reason"]
    assert "could not save the facts of localhost" in proc.stdout + proc.stderr


def test_a_corrupt_entry_is_kept_aside_and_the_run_goes_on(tmp_path):
    cache = tmp_path / "facts"
    cache.mkdir()
    (cache / "s1_localhost").write_text('{"sentinel_memory": [')
    proc, report = playbook(tmp_path, cache, ["fresh"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    copies = [p for p in cache.iterdir() if "localhost.corrupt-" in p.name]
    assert len(copies) == 1 and copies[0].read_text() == '{"sentinel_memory": ['
    assert "fresh" in json.loads(entry(cache).read_text())["__payload__"]
    assert report["ok"] is True
