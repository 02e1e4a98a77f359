"""Unit-test fixtures: the test LLM server, the action runner, the policy engine, a SysV-looking host."""
from pathlib import Path

import pytest

from llm_fixtures import llm_server, no_llm_environment, policy_engine, run_plan  # noqa: F401  pylint: disable=unused-import


@pytest.fixture()
def no_systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SysV-looking host: a `service` tool (first on PATH) that says the service is down, and no
    systemd; the tool's directory."""
    from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe  # pylint: disable=import-outside-toplevel

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "service"
    tool.write_text('#!/bin/sh\necho "$1 is not running."\nexit 3\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "no-systemd"))
    return bin_dir
