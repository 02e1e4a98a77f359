#!/usr/bin/env bash
# Ansible inventory script: the lab's running containers (see docs/lab.md).
# Hosts are named by their `sentinel.lab.host` label (lab01, lab02, ...) in the group
# `lab` and in the group of their kind, `lab_sysv` or `lab_systemd` (with the variable
# `sentinel_init: sysv|systemd`), reached through the docker CLI (community.docker.docker, ansible_host = the
# container name) as the user `sentinel` with /usr/bin/python3; become only where a task
# asks. SENTINEL_LAB_PREFIX picks another set of lab containers (default sentinel-lab).
# The inventory itself is built by lab/sentinel_lab.py (`Lab.inventory()`).
set -euo pipefail
if [[ "${1:-}" == "--host" ]]; then
  echo '{}'  # every variable is in _meta
  exit 0
fi
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
exec "$here/../../lab/lab" inventory
