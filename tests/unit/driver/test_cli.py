"""Command-line parsing, errors and exit codes; --version and --check run the real entry point and ansible-runner."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from sentinel_remediate import cli
from sentinel_remediate import report as r


def test_run_options_parse() -> None:
    args = cli.build_parser().parse_args(
        ["run", "-i", "inv.yml", "--limit", "lab01", "-e", "remediate_backend=runbook", "-e", "remediate_max_retries=2",
         "--wait", "--wait-timeout", "5", "--format", "junit", "--state-dir", "/tmp/s"])
    assert args.inventory == ["inv.yml"] and args.limit == "lab01" and args.wait and args.wait_timeout == 5
    assert dict(args.extra_vars) == {"remediate_backend": "runbook", "remediate_max_retries": 2}
    assert args.format == "junit" and args.state_dir == "/tmp/s"


def test_watch_interval_and_approvals_parse() -> None:
    args = cli.build_parser().parse_args(["watch", "--interval", "5", "--max-passes", "2"])
    assert args.interval == 5.0 and args.max_passes == 2
    args = cli.build_parser().parse_args(["approvals", "approve", "abc123", "--wait"])
    assert args.action == "approve" and args.id == "abc123" and args.wait


@pytest.mark.parametrize("argv", [
    ["run", "-e", "OPENAI_API_KEY=sk-xyz"],      # secrets only through the environment
    ["run", "-e", "remediate_llm_token=abc"],
    ["run", "-e", "novalue"],
    ["watch", "--interval", "0"],
    ["approvals"],
    ["frobnicate"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == r.EXIT_USAGE


def test_secret_extra_var_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "-e", "OPENAI_API_KEY=sk-xyz"])
    assert "looks like a secret: pass it through the environment" in capsys.readouterr().err


def test_report_unknown_run_and_empty_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--state-dir", str(tmp_path)]) == r.EXIT_USAGE
    assert "no run recorded" in capsys.readouterr().err


def test_report_formats_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "artifacts" / "run-20250101T000000Z-abcdef"
    run_dir.mkdir(parents=True)
    report = r.finish_report({"outcomes": [r.normalise_outcome("lab01", {"service": "nginx", "state": "escalated",
                                                                         "reason": "still failing"})],
                              "run": {"ident": run_dir.name, "status": "failed", "rc": 2, "hosts": ["lab01"]}})
    r.write_report(run_dir, report)
    assert cli.main(["report", "--state-dir", str(tmp_path)]) == r.EXIT_FAILED
    assert "lab01 nginx: ESCALATED | still failing" in capsys.readouterr().out
    assert cli.main(["report", "run-2025", "--format", "json", "--state-dir", str(tmp_path)]) == r.EXIT_FAILED
    assert json.loads(capsys.readouterr().out)["run"]["ident"] == run_dir.name
    assert cli.main(["report", "--format", "junit", "--state-dir", str(tmp_path)]) == r.EXIT_FAILED
    assert "<failure type=\"escalated\"" in capsys.readouterr().out
    assert cli.main(["report", "--list", "--state-dir", str(tmp_path)]) == 0
    assert f"{run_dir.name}  exit 1  escalated=1" in capsys.readouterr().out


def test_approvals_unknown_id_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["approvals", "show", "deadbeef0000", "--state-dir", str(tmp_path)]) == r.EXIT_USAGE
    assert "no pending plan 'deadbeef0000'" in capsys.readouterr().err
    assert cli.main(["approvals", "list", "--state-dir", str(tmp_path)]) == 0
    assert "no plan waits for approval" in capsys.readouterr().out


def test_missing_project_dir_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "--state-dir", str(tmp_path), "--project-dir", str(tmp_path / "nope")])
    assert code == r.EXIT_USAGE
    assert "no sentinel.remediation collection" in capsys.readouterr().err


def test_version_exits_0_with_the_collection_version() -> None:
    import subprocess
    import sys

    import yaml

    repo = Path(__file__).resolve().parents[3]
    version = yaml.safe_load((repo / "galaxy.yml").read_text())["version"]
    proc = subprocess.run([sys.executable, "-m", "sentinel_remediate", "--version", "--project-dir", str(repo)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sentinel-remediate ")
    assert f"collection sentinel.remediation {version} at {repo}" in proc.stdout


def test_run_check_is_ansible_check_mode_and_the_report_says_dry_run(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from driver_support import stand_in_project

    marker = tmp_path / "check_mode.txt"
    project = stand_in_project(tmp_path / "project", tasks=f"""    - name: Say whether this is check mode (written even in check mode)
      ansible.builtin.copy:
        content: "{{{{ ansible_check_mode }}}}"
        dest: {marker}
        mode: "0600"
      check_mode: false
""")
    (project / "playbooks" / "demo.yml").rename(project / "playbooks" / "remediate.yml")
    (project / "galaxy.yml").write_text("namespace: x\nname: y\nversion: 9.9.9\n")
    base = ["run", "-q", "--project-dir", str(project), "--state-dir", str(tmp_path / "state"),
            "-i", str(project / "hosts.yml")]
    assert cli.main(base + ["--check", "--format", "json"]) == r.EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert marker.read_text() == "True"
    assert report["run"]["check"] is True
    assert "DRY RUN" in r.render_text(report)
    assert cli.main(base + ["--format", "text"]) == r.EXIT_OK
    assert marker.read_text() == "False"
    assert "DRY RUN" not in capsys.readouterr().out


@pytest.mark.parametrize("limit", ["nomatch", "localhost,nomatch"])
def test_a_limit_part_that_matches_no_host_exits_2_with_the_pattern(
        tmp_path: Path, limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Wholly or partly empty, a --limit never passes for a pass that checked what was meant."""
    from driver_support import stand_in_project

    marker = tmp_path / "ran.txt"
    project = stand_in_project(tmp_path / "project", tasks=f"""    - name: Leave a mark
      ansible.builtin.copy:
        content: ran
        dest: {marker}
        mode: "0600"
""")
    (project / "playbooks" / "demo.yml").rename(project / "playbooks" / "remediate.yml")
    (project / "galaxy.yml").write_text("namespace: x\nname: y\nversion: 9.9.9\n")
    argv = ["run", "-q", "--project-dir", str(project), "--state-dir", str(tmp_path / "state"),
            "-i", str(project / "hosts.yml"), "--limit", limit]
    assert cli.main(argv) == r.EXIT_USAGE
    err = capsys.readouterr().err
    assert "nomatch" in err and ("matches no host" in err or "no hosts" in err), err
    assert not marker.exists()


def test_a_watch_killed_mid_pass_leaves_the_outcomes_it_had_on_record(tmp_path: Path) -> None:
    """SIGKILL while the pass still runs: the report stored as outcomes landed survives,
    marked interrupted, and `report` reads it (exit 1: an interrupted pass is no success)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from driver_support import stand_in_project

    project = stand_in_project(tmp_path / "project", tasks="")
    playbook = (project / "playbooks" / "demo.yml").read_text() + """    - name: Still working when the watch is killed
      ansible.builtin.command: sleep 120
      changed_when: false
"""
    (project / "playbooks" / "remediate.yml").write_text(playbook)
    (project / "galaxy.yml").write_text("namespace: x\nname: y\nversion: 9.9.9\n")
    state = tmp_path / "state"
    driver = Path(cli.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(driver), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "sentinel_remediate", "watch", "-q", "--interval", "1",
                             "--max-passes", "1", "--project-dir", str(project), "--state-dir", str(state),
                             "-i", str(project / "hosts.yml")], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        reports: list[Path] = []
        while time.monotonic() < deadline and not reports:
            time.sleep(0.5)
            reports = list((state / "artifacts").glob("*/report.json")) if (state / "artifacts").is_dir() else []
        assert reports, "no report stored while the pass ran"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stored = json.loads(reports[0].read_text())
    assert stored["run"]["status"] == "interrupted" and stored["run"]["partial"] is True
    assert [(o["host"], o["service"], o["state"]) for o in stored["outcomes"]] == [("localhost", "demo", "healthy")]
    assert r.exit_code(stored) == r.EXIT_FAILED
