#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
module: undo
short_description: Put back what a remediation incident changed on this host
version_added: 0.1.0
author:
  - Sentinel Remediation maintainers (@sentinel-remediation)
description:
  - Before each remediation command, the host kept every path the command's verdict declared it
    changes (M(sentinel.remediation.execute_plan) O(sentinel.remediation.execute_plan#module:snapshot)).
    This module puts the paths an incident's attempts changed back as they were before the first
    of them - restoring bytes, mode, owner, group and link targets, recreating what was removed or
    moved away, removing what was created. Attempts that were already put back (they did not heal)
    are left out.
  - Shows, for each path, a redacted diff from what is there now to what it becomes. Run it in
    check mode first (the C(sentinel.remediation.undo) playbook does by default).
  - A path that changed again after the incident (someone or something else edited it since) is
    not put back unless O(force) is true; the diff says what would be lost.
notes:
  - Only paths are undone; services the incident started or restarted are not stopped again.
  - Not kept, so not restored - extended attributes, ACLs, SELinux labels, hard-link identity.
requirements:
  - Python 3.9 or later on the target; run with O(ignore:become=true) (the store is root's).
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode nothing changes; RV(paths) shows what would be put back, with the diff.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  incident:
    description:
      - The incident's id as the report shows it (C(undo_id), for example C(nginx-20261128T055900Z)).
    type: str
    required: true
  dir:
    description: The store's directory on the host (the role's C(remediate_snapshot_dir)); default C(/var/lib/sentinel-remediation).
    type: str
  force:
    description: Also put back paths that changed again after the incident (their later change is lost).
    type: bool
    default: false
seealso:
  - module: sentinel.remediation.execute_plan
"""

EXAMPLES = r"""
- name: Show what undoing the incident would put back
  sentinel.remediation.undo:
    incident: nginx-20261128T055900Z
  check_mode: true
  become: true
  register: preview

- name: Put it back
  sentinel.remediation.undo:
    incident: nginx-20261128T055900Z
  become: true
"""

RETURN = r"""
paths:
  description: One entry per path the incident changed.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The path.
      type: str
    now:
      description: What it is now (C(kind), C(size), C(digest), C(mode), C(uid), C(gid), C(target)).
      type: dict
    restore_to:
      description: What it was before the incident, and becomes.
      type: dict
    diff:
      description: A redacted, bounded unified diff from now to what it becomes (or a line saying what changes).
      type: str
    drifted:
      description: Whether it changed again after the incident.
      type: bool
    outcome:
      description: V(restored), V(unchanged), V(would restore), V(skipped (changed since the incident)) or the error.
      type: str
restored:
  description: The paths put back.
  returned: always
  type: list
  elements: str
failed:
  description: The paths that could not be put back, each with C(path) and C(error).
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot


def undo(incident, root, force, check):
    """``{"paths", "restored", "failed", "changed"}`` for the incident; raises SnapshotError."""
    manifest = snapshot.load_manifest(root, incident)
    if manifest is None:
        raise snapshot.SnapshotError("no snapshots of incident %s on this host (never kept, pruned by age, or "
                                     "another host's)" % incident)
    store = snapshot.ContentStore(os.path.join(root or snapshot.default_root(), "content"))
    paths, restored, failed = [], [], []
    for item in snapshot.undo_plan(manifest):
        now = snapshot.capture_as(item["path"], item["before"], store)
        before = item["before"]
        entry = {"path": item["path"], "now": snapshot.summary(now), "restore_to": snapshot.summary(before),
                 "diff": snapshot.diff(item["path"], now, before, store),
                 "drifted": not snapshot.same(now, item["after"])}
        if snapshot.same(now, before):
            entry["outcome"] = "unchanged"
        elif entry["drifted"] and not force:
            entry["outcome"] = "skipped (changed since the incident; force to put it back anyway)"
        elif check:
            entry["outcome"] = "would restore"
        else:
            ok, note = snapshot.restore(item["path"], before, store)
            entry["outcome"] = note if ok else "failed: %s" % note
            if ok:
                restored.append(item["path"])
            else:
                failed.append({"path": item["path"], "error": note})
        paths.append(entry)
    if not check and restored and not failed:
        mark_undone(root, incident, manifest)
    return {"paths": paths, "restored": restored, "failed": failed,
            "changed": bool(restored) or (check and any(p["outcome"] == "would restore" for p in paths))}


def mark_undone(root, incident, manifest):
    """Record that the incident's changes were put back: a second undo has nothing to do."""
    for attempt in manifest.get("attempts") or []:
        attempt["rolled_back"] = True
    snapshot.save_manifest(root, incident, manifest)


def main() -> None:
    module = AnsibleModule(argument_spec=dict(
        incident=dict(type="str", required=True),
        dir=dict(type="str"),
        force=dict(type="bool", default=False),
    ), supports_check_mode=True)
    params = module.params
    empty = dict(paths=[], restored=[], failed=[])
    try:
        found = undo(params["incident"], params["dir"], params["force"], module.check_mode)
    except (snapshot.SnapshotError, snapshot.ContentStoreError, OSError) as exc:
        module.fail_json(msg="undo of incident %s: %s" % (params["incident"], to_native(exc)), **empty)
    if found["failed"]:
        module.fail_json(msg="undo of incident %s: %d path(s) could not be put back: %s" % (
            params["incident"], len(found["failed"]),
            "; ".join("%s: %s" % (f["path"], f["error"]) for f in found["failed"])), **found)
    module.exit_json(**found)


if __name__ == "__main__":
    main()
