# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel's half of a verdict: what a command may do, derived from what the policy said.

The policy (``policy.classify``) reads a command and lists its effects ("deletes
/run/nginx.pid", "starts unit nginx.service", "requests http://127.0.0.1/"). This module
turns a verdict into the ``confine`` the host's plan runner enforces with Landlock
(``module_utils/confine_run.py``, ``module_utils/landlock.py``):

- ``write``: paths whose content the command changes in place ("writes", "truncates");
- ``create``: directories in which it makes entries (the declared path's parent for
  "creates X", "moves to X", "copies to X"; X itself for "... into X"), and the file's own
  directory for tools that write by making a new file beside it and renaming it over
  ("applies `SCRIPT` to X": ``sed -i``; "compresses X"; "rewrites X": the account tools'
  ``/etc/group``);
- ``remove``: directories from which it removes entries ("deletes X", "moves away X",
  "replaces X": X's parent);
- ``exec``: the programs of its argv (wrappers and the tool), nothing else;
- a daemon's configuration test ("tests the nginx configuration") may also write in the
  policy's log areas: it opens the logs its configuration names, and fails when it cannot;
- ``tcp``: true only for tools the policy reads as clients of a server (their effects are
  requests to it);
- ``exception``: why it runs without a ruleset: a tool that runs init scripts or starts a
  daemon in its own process tree (the daemon would inherit the ruleset for life, unable
  to bind its port or write its logs). Its argv is judged by the policy as any other;
- ``unconfinable``: why no ruleset can hold it to its verdict: a tool whose job is to run
  other programs chosen by its data (logrotate's postrotate scripts, certbot's hooks), or
  whose verdict declares a change without naming its paths (a package install). Like a command on a host without Landlock, it then needs a human's approval
  (``preferred``) or is refused (``required``).

Any effect this module does not know as a change grants nothing: an unknown verb fails
closed (the command is refused by the kernel and the result says what it tried). Owner
and mode changes (``chown``, ``chmod``) are not governed by Landlock; the policy alone
judges them.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import policy as policy_mod

# Policy rules of tools that run init scripts or start daemons in their own process tree.
_INIT_RUNNERS = frozenset(("service", "initscript", "invoke_rc_d", "update_rc_d", "pg_ctl", "pg_ctlcluster",
                           "apachectl"))
# Policy rules of tools whose job is to run programs their data names (postrotate scripts,
# renewal hooks). Package tools are judged by their effects: a query ("reads the package
# database") is confined like any read, an install or removal is a change without named paths.
_RUNS_PROGRAMS = frozenset(("logrotate", "certbot"))
# Policy rules of tools that talk to a server over its protocol (HTTP, Redis, SQL, ...).
_NETWORK_CLIENTS = frozenset(("curl", "wget", "redis_cli", "psql", "mysql", "mysqladmin", "pg_isready", "netcat"))
# The one tool whose service control happens in the service manager, not in its own tree.
_SERVICE_MANAGER_CLIENT = "systemctl"

_PATH_EFFECT = re.compile(r"^(?P<verb>.*?) (?P<path>/\S*)(?P<recursive> recursively)?$")
_DAEMON_EFFECT = re.compile(r"^(?:starts|restarts|reloads|stops) ")
# A daemon's configuration test opens the logs its configuration names, for append
# (`nginx -t` fails when it cannot): those live in the policy's log areas.
_CONFIG_TEST_EFFECT = re.compile(r"^tests the .*configuration")
# A change the verdict declares without naming its paths ("creates the host's missing SSH host
# keys", "installs nginx"): the files come from the tool's data, no rule can name them.
_UNNAMED_CHANGE = re.compile(r"^(?:creates|installs|removes|refreshes|deletes|finishes configuring) ")

# Effect verbs (their first words) by what they need from the kernel.
_IN_PLACE = ("writes its error log to", "writes", "truncates")
_BESIDE = ("applies", "compresses", "decompresses", "rewrites")
_INTO = ("creates what tmpfiles.d declares under", "moves into", "copies into", "extracts into")
_CREATE = ("creates", "moves to", "copies to", "keeps the original at", "enables")
_REMOVE = ("deletes", "moves away", "replaces", "disables")
# Path effects that need no right from the kernel: reads (not restricted), a symlink's
# target, owner and mode changes (Landlock does not govern them; the policy alone does).
_NO_GRANT = ("reads", "inspects", "copies", "archives", "lists the tree", "links to", "loads configuration",
             "prints", "sends or prints", "finds", "tests", "checks", "gives to", "sets mode", "sets the mode of",
             "changes owner/mode of")


def _parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) or "/"


def _starts(verb: str, words: Sequence[str]) -> bool:
    return any(verb == w or verb.startswith(w + " ") for w in words)


def unknown_path_effects(effects: Sequence[str]) -> list[str]:
    """Path effects whose verb this module does not know: no ruleset derived from them could
    be trusted to match the verdict, so the command counts as one that cannot be confined."""
    known = _IN_PLACE + _BESIDE + _INTO + _CREATE + _REMOVE + _NO_GRANT
    found = []
    for effect in effects:
        match = _PATH_EFFECT.match(str(effect))
        if match and not _starts(match.group("verb"), known):
            found.append(str(effect))
    return found


def path_grants(effects: Sequence[str]) -> dict[str, list[str]]:
    """``{"write", "create", "remove"}`` from a verdict's effect lines."""
    grants: dict[str, list[str]] = {"write": [], "create": [], "remove": []}

    def add(key: str, path: str) -> None:
        if path not in grants[key]:
            grants[key].append(path)

    for effect in effects:
        found = _PATH_EFFECT.match(str(effect))
        if not found:
            continue
        verb, path = found.group("verb"), posixpath.normpath(found.group("path"))
        if _starts(verb, _IN_PLACE):
            add("write", path)
        elif _starts(verb, _BESIDE):
            add("write", path)
            add("create", _parent(path))
            add("remove", _parent(path))
        elif _starts(verb, _INTO):
            add("create", path)
        elif _starts(verb, _CREATE):
            add("create", _parent(path))
        elif _starts(verb, _REMOVE):
            add("remove", _parent(path))
    return grants


def _tool(argv: list[str], loaded: Any) -> tuple[list[str], str]:
    """The programs the argv runs (a leading runuser, wrappers, the tool) and the tool's
    policy rule name."""
    start = 0
    programs = [argv[0]]
    if argv[0] == "runuser" and "--" in argv:
        start = argv.index("--") + 1
    if start >= len(argv):
        return programs, ""
    # The policy's own reading of wrappers (`timeout 5 systemctl ...`).
    index = policy_mod._skip_wrappers(argv, start, loaded, [])  # pylint: disable=protected-access
    if index < 0:
        index = start
    programs += [word for word in argv[start:index] if word in loaded["wrappers"]] + [argv[index]]
    tool = argv[index]
    if tool.startswith("/etc/init.d/"):
        return _unique(programs), "initscript"
    name = tool.rsplit("/", 1)[-1]
    spec = loaded["tools"].get(name) or {}
    return _unique(programs), str(spec.get("rule", "generic"))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def derive(verdict: Mapping[str, Any], policy: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The ``confine`` of one checked command (an allowed or approved verdict); None for a
    verdict without an argv (refused: it never runs)."""
    argv = verdict.get("argv")
    if not argv:
        return None
    loaded = policy_mod.load_policy(policy)
    effects = [str(e) for e in verdict.get("effects") or []]
    programs, rule = _tool(list(argv), loaded)
    tool = programs[-1].rsplit("/", 1)[-1]
    if rule in _INIT_RUNNERS or (tool != _SERVICE_MANAGER_CLIENT and any(_DAEMON_EFFECT.match(e) for e in effects)):
        return {"exception": f"service control: `{tool}` runs init scripts or starts a daemon in its own process "
                             "tree, which must not inherit a ruleset (its argv is judged by the policy)",
                "rules": "none (service control)"}
    if rule in _RUNS_PROGRAMS:
        return {"unconfinable": f"`{tool}` runs programs its data names (scripts, hooks); no ruleset can limit "
                                "them to the verdict",
                "rules": "none (cannot be confined)"}
    unnamed = [e for e in effects if _UNNAMED_CHANGE.match(e) and not _PATH_EFFECT.match(e)]
    if unnamed:
        return {"unconfinable": f"the verdict declares {unnamed[0]!r} without naming the paths it changes",
                "rules": "none (cannot be confined)"}
    unknown = unknown_path_effects(effects)
    if unknown:
        return {"unconfinable": f"the verdict declares {unknown[0]!r}, a change the kernel's rules cannot express",
                "rules": "none (cannot be confined)"}
    grants = path_grants(effects)
    tcp = rule in _NETWORK_CLIENTS
    confine: dict[str, Any] = dict(grants, exec=programs, tcp=tcp)
    if any(_CONFIG_TEST_EFFECT.match(e) for e in effects):
        # A config test opens the daemon's logs and its PID file as the daemon would (nginx -t
        # creates or opens /run/nginx.pid for writing): the log areas and the directories PID
        # files live in, never anything else; and it binds the daemon's listen sockets to test
        # them, never connecting.
        for area in [*loaded["log_areas"], *_pid_areas(loaded)]:
            if str(area) not in confine["create"]:
                confine["create"].append(str(area))
        confine["bind"] = not tcp
    confine["rules"] = describe(confine)
    return confine


def _pid_areas(loaded: Mapping[str, Any]) -> list[str]:
    """The directories above the default scope's PID-file patterns (``/run/*.pid`` -> ``/run``)."""
    areas: list[str] = []
    for pattern in (loaded.get("default_scope") or {}).get("pid_files") or []:
        fixed = str(pattern).split("*", 1)[0]
        area = fixed.rstrip("/") if fixed.endswith("/") else fixed.rsplit("/", 1)[0]
        if area.startswith("/") and len(area) > 1 and area not in areas:
            areas.append(area)
    return areas


def describe(confine: Mapping[str, Any]) -> str:
    """A ``confine`` in words, for approvers, the journal and the report."""
    if confine.get("exception") or confine.get("unconfinable"):
        return "not confined: " + str(confine.get("exception") or confine.get("unconfinable"))
    parts = ["exec only " + ", ".join(confine.get("exec") or [])]
    changes = ([f"write {p}" for p in confine.get("write") or []] + [f"create in {p}" for p in confine.get("create") or []]
               + [f"remove in {p}" for p in confine.get("remove") or []])
    parts.append("changes only: " + ", ".join(changes) if changes else "no file changes")
    parts.append("TCP allowed (a network read)" if confine.get("tcp")
                 else "TCP bind only (a config test)" if confine.get("bind") else "no TCP")
    return "; ".join(parts)


def gate(verdicts: Sequence[Mapping[str, Any]], mode: str, host_abi: Any) -> tuple[str, str]:
    """``(gate, note)`` for a plan the policy would run as it is: ``("approval", why)`` when,
    with ``preferred``, a command cannot be confined on this host (no Landlock: ``host_abi``
    0) or at all; ``("escalate", why)`` for the same with ``required``; ``("", "")`` when
    every command can be confined, is a declared exception, or confinement is off. An
    unknown ``host_abi`` (None) leaves the host's kernel to the runner, which applies the
    same rule."""
    if mode == "off":
        return "", ""
    problems = []
    for verdict in verdicts:
        confine = derive(verdict)
        if confine is None or confine.get("exception"):
            continue
        if confine.get("unconfinable"):
            problems.append(f"`{verdict.get('command')}`: {confine['unconfinable']}")
        elif host_abi == 0:
            problems.append(f"`{verdict.get('command')}`: this host's kernel cannot confine commands (no Landlock)")
    if not problems:
        return "", ""
    if mode == "required":
        return "escalate", "refused: confinement is required and " + "; ".join(problems)
    return "approval", "cannot be confined, so a human approves it (confinement preferred): " + "; ".join(problems)
