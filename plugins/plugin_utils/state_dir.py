# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a run keeps its state on the controller, outside the collection.

The collection may be installed read-only (an execution environment, a shared
collections path), so pending plans, the incident journal and shared plans live in a
state directory of the user who runs Ansible:

1. the directory the operator names (``remediate_artifacts_dir``);
2. else ``$SENTINEL_STATE_DIR/remediation`` (the driver's ``--state-dir`` layout);
3. else ``$XDG_STATE_HOME/sentinel-remediation/remediation``;
4. else ``~/.local/state/sentinel-remediation/remediation``.

XDG state rather than ``~/.ansible``: this is data that must survive between runs but is
not a cache nor configuration, which is what the XDG state directory is for, and the
driver (``sentinel-remediate``) already keeps its runs there, so a playbook run and
``sentinel-remediate approvals list`` see the same pending plans by default.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

from ansible_collections.sentinel.remediation.plugins.module_utils.state_directory import exposure

STATE_NAME = "sentinel-remediation"
# The collection this file belongs to: <root>/plugins/plugin_utils/state_dir.py.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class StateDirError(ValueError):
    """The state directory cannot be used (the message names the path and what to set)."""


def state_root(env: Mapping[str, str] | None = None) -> str:
    """The user's state directory of sentinel.remediation (not created)."""
    env = os.environ if env is None else env
    if env.get("SENTINEL_STATE_DIR"):
        return os.path.expanduser(env["SENTINEL_STATE_DIR"])
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, STATE_NAME)


def artifacts_dir(configured: str | None, env: Mapping[str, str] | None = None) -> str:
    """The directory of pending plans, the journal and shared plans: the configured one, else the default."""
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.abspath(os.path.join(state_root(env), "remediation"))


def installed_collection_root(root: str = COLLECTION_ROOT) -> str | None:
    """This collection's directory when it is an installed one (MANIFEST.json), else None (a checkout)."""
    return root if os.path.isfile(os.path.join(root, "MANIFEST.json")) else None


def _inside(path: str, parent: str) -> bool:
    path, parent = os.path.realpath(path), os.path.realpath(parent)
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def ensure_writable(path: str, variable: str = "remediate_artifacts_dir", collection: str | None = None) -> str:
    """Create ``path`` (0700) when missing and prove that a file can be written in it.

    ``collection``: an installed collection's directory; a state directory inside it is
    refused, writable or not (an installed collection is content, never state).
    Raises StateDirError naming the path, the reason and what to set.
    """
    hint = f"set {variable} (or SENTINEL_STATE_DIR) to a directory this user can write"
    if collection and _inside(path, collection):
        raise StateDirError(f"the state directory {path} ({variable}) is inside the installed collection "
                            f"{collection}, which must never be written; {hint}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path} is not a directory")
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StateDirError(f"the state directory {path} ({variable}) is not writable: {reason}; {hint}") from None
    try:
        why = exposure(os.path.abspath(path))
    except OSError as exc:
        why = f"a directory on the way cannot be examined ({exc.strerror or exc})"
    if why:
        # What the run trusts without a MAC lives here (the journal: what ran and what healed,
        # which memory learns fixes from; the leases): another account that may create, rename or
        # remove names in it or in a directory above it could plant them. The pending plans are
        # authenticated, the rest is not.
        raise StateDirError(f"the state directory {path} ({variable}) cannot be trusted: {why}; another account "
                            f"could plant journal records and leases in it; use a directory of this user's own "
                            f"under directories only root or this user may write (it is created 0700)")
    return path


# The fact cache holds each host's memory and its pending plans between runs.
_VOLATILE_CACHES = {"memory", "ansible.builtin.memory"}


def volatile_cache_warning(cache_plugin: str | None) -> str | None:
    """A warning when the configured fact cache forgets everything at the end of the run."""
    if str(cache_plugin or "memory") not in _VOLATILE_CACHES:
        return None
    return ("the fact cache is 'memory': remembered fixes and plans waiting for approval are lost when this run "
            "ends (resume.yml will not find them); set fact_caching (ANSIBLE_CACHE_PLUGIN) to "
            "sentinel.remediation.jsonfile or community.general.redis, with fact_caching_connection")
