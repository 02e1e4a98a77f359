"""`sentinel-remediate runbooks check` and the --runbook-dir / --docs-dir flags (no playbook runs here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sentinel_remediate import cli
from sentinel_remediate import report as r

REPO = Path(__file__).resolve().parents[3]
OPERATOR = REPO / "tests" / "data" / "knowledge" / "runbooks"


def check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["runbooks", "check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_bundled_runbooks_pass_and_every_step_shows_its_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = check([str(REPO / "runbooks"), "--format", "json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["errors"] == []
    assert report["totals"]["runbooks"] == len(list((REPO / "runbooks").glob("*.yml")))
    steps = [s for entry in report["runbooks"] for s in entry["steps"]]
    assert steps and all(s["verdict"] in ("allow", "approval", "reject") and s["reasons"] for s in steps)
    conflict = next(e for e in report["runbooks"] if e["id"] == "nginx_port_conflict")
    assert conflict["steps"][0]["command"] == "kill {port_owner_pid:80}"
    assert conflict["steps"][0]["example"] == "kill 4242"
    assert not any(e["overrides"] for e in report["runbooks"])
    # an approval: true step is shown raised to approval
    masked = next(e for e in report["runbooks"] if e["id"] == "systemd_unit_masked")
    assert masked["steps"][0]["approval"] is True and masked["steps"][0]["verdict"] in ("approval", "reject")


def test_operator_runbooks_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = check([str(OPERATOR)], capsys)
    assert code == 0
    assert f"{OPERATOR / 'nginx_stopped.yml'}: nginx_stopped (services: nginx)" in out
    assert f"overrides the bundled runbook {REPO / 'runbooks' / 'nginx_stopped.yml'}" in out
    assert "1. kill {port_owner_pid:11211}" in out and "classified as: kill 4242" in out
    assert "-> ALLOW:" in out or "-> APPROVAL:" in out
    assert out.rstrip().splitlines()[-1].startswith("5 runbook(s), 0 error(s)")


def test_schema_errors_name_file_and_key_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "typo.yml").write_text("id: a\nmatch: {facts: [not_runing]}\nsteps: [{command: service a start}]\n")
    (tmp_path / "pid.yml").write_text("id: b\nmatch: {any: ['(']}\nsteps: [{command: kill 31337}]\n")
    (tmp_path / "good.yml").write_text("id: c\nmatch: {facts: [not_running]}\nsteps: [{command: service c start}]\n")
    code, out, _err = check([str(tmp_path)], capsys)
    assert code == r.EXIT_FAILED
    assert f"ERROR {tmp_path / 'typo.yml'}: match.facts[0]: unknown fact 'not_runing'" in out
    assert f"ERROR {tmp_path / 'pid.yml'}: match.any[0]: bad pattern '('" in out
    assert f"ERROR {tmp_path / 'pid.yml'}: steps[0].command: `kill 31337` signals a PID written by hand" in out
    assert f"{tmp_path / 'good.yml'}: c (services: any)" in out  # the good one is still reported


def test_warning_for_a_runbook_whose_evidence_is_not_specific(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "vague.yml").write_text(
        "id: vague\nservices: [billing-api]\nmatch: {any: ['not running']}\n"
        "steps: [{command: rm -f /run/billing-api/worker.lock}, {command: service billing-api start}]\n")
    code, out, _err = check([str(tmp_path)], capsys)
    assert code == 0 and "WARNING: it fits a billing-api that shows only 'not running'" in out
    assert cli.main(["runbooks", "check", str(tmp_path), "--strict"]) == r.EXIT_FAILED


def test_strict_fails_on_a_refused_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wipe.yml").write_text(
        "id: wipe\nservices: [app]\nmatch: {facts: [disk_full]}\nsteps: [{command: rm -rf /}]\n")
    code, out, _err = check([str(tmp_path)], capsys)
    assert code == 0 and "-> REJECT:" in out and "1 reject" in out
    assert cli.main(["runbooks", "check", str(tmp_path), "--strict"]) == r.EXIT_FAILED


def test_policy_overrides_change_the_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yml"
    policy.write_text("absent_tools: [service]\n")
    code, out, _err = check([str(REPO / "runbooks"), "--policy", str(policy), "--format", "json"], capsys)
    steps = [s for e in json.loads(out)["runbooks"] for s in e["steps"] if s["command"].startswith("service ")]
    assert code == 0 and steps and all(s["verdict"] == "reject" for s in steps)
    policy.write_text("- not a mapping\n")
    assert check([str(REPO / "runbooks"), "--policy", str(policy)], capsys)[0] == r.EXIT_USAGE


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = check([str(tmp_path / "nope")], capsys)
    assert code == r.EXIT_USAGE and "does not exist" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["runbooks", "check"])
    assert exc.value.code == r.EXIT_USAGE


def test_the_installed_command_runs_outside_pytest(tmp_path: Path) -> None:
    """As CI runs it: a fresh process that must find the collection itself."""
    proc = subprocess.run([sys.executable, "-m", "sentinel_remediate", "runbooks", "check", str(REPO / "runbooks")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "driver"), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "0 error(s)" in proc.stdout


# ---------------------------------------------------------------------- run / watch flags

def test_knowledge_flags_become_role_variables(tmp_path: Path) -> None:
    docs = tmp_path / "wiki"
    docs.mkdir()
    args = cli.build_parser().parse_args(["run", "--runbook-dir", str(OPERATOR), "--docs-dir", str(docs),
                                          "--docs-dir", str(OPERATOR.parent / "docs")])
    options = cli._pass_options(args, cli._state(argparse_state(tmp_path)))
    assert options.extravars["remediate_runbook_dirs"] == [str(OPERATOR)]
    assert options.extravars["remediate_docs_dirs"] == [str(docs), str(OPERATOR.parent / "docs")]
    watch = cli.build_parser().parse_args(["watch", "--runbook-dir", str(OPERATOR)])
    assert watch.runbook_dirs == [str(OPERATOR)]


def test_a_missing_knowledge_dir_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "--state-dir", str(tmp_path), "--runbook-dir", str(tmp_path / "nope")])
    assert code == r.EXIT_USAGE
    assert "--runbook-dir" in capsys.readouterr().err


def argparse_state(tmp_path: Path):
    return cli.build_parser().parse_args(["run", "--state-dir", str(tmp_path)])


def test_bad_team_runbooks_stop_run_and_watch_before_any_pass(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "runbooks"
    bad.mkdir()
    (bad / "broken.yml").write_text("id: broken\nmatch: {facts: [port_taken]}\nsteps: [{command: service x start}]\n")
    for command in ("run", "watch"):
        code = cli.main([command, "--state-dir", str(tmp_path / "state"), "--runbook-dir", str(bad)])
        err = capsys.readouterr().err
        assert code == r.EXIT_USAGE, err
        assert f"{bad / 'broken.yml'}: match.facts[0]: unknown fact 'port_taken'" in err
    assert not (tmp_path / "state" / "artifacts").exists() or not any((tmp_path / "state" / "artifacts").iterdir())
