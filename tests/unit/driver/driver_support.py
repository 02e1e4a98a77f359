"""Helpers shared by the driver's unit tests."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def stand_in_project(root: Path, tasks: str = "") -> Path:
    """A project with playbooks/demo.yml (``tasks``, then the outcome record the role makes)
    and hosts.yml for localhost: a real ansible-runner pass without the lab."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "playbooks").mkdir(exist_ok=True)
    (root / "playbooks" / "demo.yml").write_text(f"""
- name: Stand-in for the remediation play
  hosts: all
  gather_facts: false
  tasks:
{tasks}    - name: Record an outcome the way the role does
      ansible.builtin.set_stats:
        data:
          sentinel_remediation:
            - {{service: demo, state: healthy}}
        per_host: true
        aggregate: true
""")
    (root / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return root
