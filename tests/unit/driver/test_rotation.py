"""Real ansible-runner passes on localhost: the artifacts kept on disk are bounded by --rotate."""
from __future__ import annotations

from pathlib import Path

from driver_support import stand_in_project
from sentinel_remediate import report as r
from sentinel_remediate.runner import PassOptions, State, run_pass


def test_old_runs_are_rotated_and_the_last_report_is_kept(tmp_path: Path) -> None:
    project = stand_in_project(tmp_path / "project")
    state = State(tmp_path / "state")
    idents = []
    for dummy in range(4):
        options = PassOptions(playbook="playbooks/demo.yml", inventory=[str(project / "hosts.yml")],
                              hosts=["localhost"], rotate=2)
        result = run_pass(state, project, options, out=None)
        assert r.exit_code(result) == r.EXIT_OK, result
        idents.append(result["run"]["ident"])

    kept = sorted(p.name for p in state.artifacts.iterdir())
    assert len(kept) <= 2 and idents[-1] in kept
    assert idents[0] not in kept
    assert r.load_report(r.find_run(state.artifacts, None))["run"]["ident"] == idents[-1]
