"""Real ansible-runner passes on localhost: the artifacts kept on disk are bounded by --rotate."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from sentinel_remediate import report as r
from sentinel_remediate.runner import PassOptions, State, run_pass

PLAYBOOK = """
- name: Stand-in for the remediation play
  hosts: all
  gather_facts: false
  tasks:
    - name: Record an outcome the way the role does
      ansible.builtin.set_stats:
        data:
          sentinel_remediation:
            - {service: demo, state: healthy}
        per_host: true
        aggregate: true
"""


def test_old_runs_are_rotated_and_the_last_report_is_kept(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "playbooks" / "demo.yml").write_text(PLAYBOOK)
    (project / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
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
