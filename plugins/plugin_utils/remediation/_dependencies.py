# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dependent's incident and the services it depends on (``dependency_evidence``).

``with_dependencies``: the evidence a dependent's incident plans with, its dependencies
judged by what it reports: a dependency its errors name is a suspect even when its own
checks pass, and that dependency's lines on the same failure join the evidence (read on
the host with the evidence module when the health check did not already bring them).
``waiting_on``: the failing dependencies a dependent waits on instead of acting.
A dependent that is degraded (its checks time out while it runs) waits on something: its
watched dependencies' session views join its evidence, and what they show as the cause
(``dependency_cause``) is its ``degraded`` entry.
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sentinel.remediation.plugins.module_utils import server_sessions, service_spec
from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_cause
from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_evidence as rules

from . import vocabulary as words
from .context import HostPort, RunContext

EVIDENCE_MODULE = "sentinel.remediation.evidence"
# The evidence module's definition options (a resolved definition may hold more keys).
_DEFINITION_KEYS = frozenset(service_spec.definition_spec()) - {"name"}


def _dependency_evidence(ctx: RunContext, port: HostPort, name: str, definition: Mapping, said: str,
                         sessions: bool = False, objects=(), access: Mapping | None = None) -> Mapping:
    """The dependency's own evidence, read on the host (read only); {} when it could not be read.
    ``sessions``: with its server's session view (``sessions``), when it has one; ``objects``:
    with where objects of these names are (``objects``), when it has such a view; ``access``: with
    who may use what the dependent was refused (``access``), when it has such a view."""
    args = {k: v for k, v in definition.items() if k in _DEFINITION_KEYS and v not in (None, [], "")}
    # Its own lines on the failure are what is read of it (dependency_evidence): its logs first.
    args.update(service=name, error=said[:2000], log_lines=ctx.args["evidence_log_lines"],
                max_bytes=ctx.args["evidence_max_bytes"], tools=[], logs_first=True)
    if sessions:
        args["sessions"] = True
    if objects:
        args["objects"] = list(objects)
    if access:
        args["access"] = dict(access)
    result = port.run_module(EVIDENCE_MODULE, args)
    if result.get("failed") or result.get("unreachable"):
        ctx.log(f"sentinel.remediation.heal: the evidence of {name} (a suspect of {ctx.host}'s failure) could not "
                f"be read: {result.get('msg') or 'no reason given'}")
        return {}
    evidence = result.get("evidence")
    return evidence if isinstance(evidence, Mapping) else {}


def with_dependencies(ctx: RunContext, port: HostPort, name: str, definition: Mapping, error: str,
                      evidence: Mapping, rows: Mapping[str, Mapping], waits: bool | None = None) -> dict:
    """``evidence`` with what its dependencies' part is: each dependency the dependent's own
    errors name is marked a suspect in ``dependencies`` (when its checks pass), and its
    lines on the same failure are added under ``dependency_evidence`` (bounded).

    Every evidence a dependent's failure is signed or planned with goes through here (the
    pass's, each attempt's re-read, the resume's fresh look): a signature computed from
    evidence without this part differs from one with it, and an approved plan would be
    refused as "the failure changed". ``rows``: this pass's health rows by service ({} after
    an attempt, when the dependencies' states in ``evidence`` say whether they failed).
    ``waits``: the dependent is degraded (default: its own row in ``rows`` says so); its watched
    dependencies' session views are added (``dependency_sessions``) and the cause they show
    (``degraded``)."""
    evidence = dict(evidence or {})
    if waits is None:
        waits = bool((rows.get(name) or {}).get("degraded"))
    views: dict = {}
    found: dict = {}  # each database dependency's `objects` view, read with its evidence when that is read
    names = rules.missing_objects(error, evidence)
    mentions = rules.missing_object_mentions(error, evidence)
    refused = rules.access_refusals(error, evidence)
    held: dict = {}  # each database dependency's `access` view, when the dependent was refused
    states = dict(evidence.get("dependencies") or {}) if isinstance(evidence.get("dependencies"), Mapping) else {}
    sections = {}
    for dep_definition in ctx.watched_dependencies(definition):
        dep = str(dep_definition["name"])
        named = rules.naming(error, evidence, dep_definition)
        if not named:
            continue
        lines = [line for line, _by in named]
        row = rows.get(dep) or {}
        # Without this pass's row (evidence read again after an attempt), the dependency's state
        # as the same check reported it says whether it failed (the host's verdict, not its words).
        up = evidence.get("dependency_up") if isinstance(evidence.get("dependency_up"), Mapping) else {}
        failing = row["healthy"] is False if "healthy" in row else up.get(dep) is False
        if not failing:
            states[dep] = f"{states.get(dep) or 'healthy'}; " + rules.suspect_note(name, [by for _l, by in named])
        dep_evidence = row.get("evidence") if isinstance(row.get("evidence"), Mapping) else None
        database = server_sessions.server_kind(dep_definition) is not None
        if dep_evidence is None:
            dep_evidence = _dependency_evidence(ctx, port, dep, dep_definition, "\n".join(lines), sessions=waits,
                                                objects=names if database else (),
                                                access=refused if database else None)
            if waits and isinstance(dep_evidence.get("sessions"), Mapping):
                views[dep] = dep_evidence["sessions"]
            if isinstance(dep_evidence.get("objects"), Mapping):
                found[dep] = dep_evidence["objects"]
        elif refused and database:
            # its evidence came with this pass's row (it failed): what refused the dependent is read apart
            dep_evidence = dict(dep_evidence)
            dep_evidence["access"] = _dependency_evidence(ctx, port, dep, dep_definition, "\n".join(lines),
                                                          access=refused).get("access")
        if isinstance(dep_evidence.get("access"), Mapping):
            held[dep] = rules.render_access(name, dep, refused, dep_evidence["access"])
            powers = dep_evidence["access"].get("attributes")
            if isinstance(powers, Mapping):  # for the policy: a grant of a role with powers is refused
                evidence["role_attributes"] = {**(evidence.get("role_attributes") or {}), **powers}
        sections[dep] = rules.section(name, dep, rules.relevant_lines(dep_evidence, rules.search_terms(lines)),
                                      read=rules.sources_read(dep_evidence))
    if states:
        evidence["dependencies"] = states
    if sections:
        evidence["dependency_evidence"] = sections
    if held:
        evidence["dependency_access"] = held
    if mentions:
        # which server's wording the dependent's errors use (only PostgreSQL's has an objects view)
        evidence["missing_objects"] = rules.render_missing(name, mentions)
    if names:
        evidence = _where_objects_are(ctx, port, name, definition, names, evidence, found)
    if waits:
        evidence = _where_it_waits(ctx, port, name, definition, error, evidence, rows, views)
    return evidence


def _where_objects_are(ctx: RunContext, port: HostPort, name: str, definition: Mapping, names: list[str],
                       evidence: dict, found: dict) -> dict:
    """A dependent whose errors say the database objects ``names`` do not exist (``relation
    "visits" does not exist``) while its database runs: where objects of those names are in its
    watched database servers, and what decides how sessions resolve names there
    (``dependency_objects``). A table moved to another schema, a role's search_path changed, the
    wrong database: each shows here, none in the dependent's own evidence. ``found``: the views
    already read with a dependency's evidence (each server is asked once)."""
    texts = {}
    for dep_definition in ctx.watched_dependencies(definition):
        if server_sessions.server_kind(dep_definition) is None:
            continue
        dep = str(dep_definition["name"])
        view = found.get(dep)
        if view is None:
            view = _dependency_evidence(ctx, port, dep, dep_definition, "", objects=names).get("objects")
        if isinstance(view, Mapping):
            texts[dep] = rules.render_objects(name, dep, view)
    if texts:
        evidence["dependency_objects"] = texts
    return evidence


def _where_it_waits(ctx: RunContext, port: HostPort, name: str, definition: Mapping, error: str, evidence: dict,
                    rows: Mapping[str, Mapping], views: dict) -> dict:
    """A degraded dependent's evidence with its watched dependencies' session views (each read
    once, with the evidence module) and its ``degraded`` entry naming the causes they show."""
    watched = [str(d["name"]) for d in ctx.watched_dependencies(definition)]
    for dep in watched:
        if dep not in views and (rows.get(dep) or {}).get("healthy") is not False:
            read = _dependency_evidence(ctx, port, dep, ctx.definitions[dep], error, sessions=True)
            if isinstance(read.get("sessions"), Mapping):
                views[dep] = read["sessions"]
    causes = []
    texts = {}
    held = {}
    for dep in watched:
        if dep in views:
            texts[dep] = dependency_cause.render_sessions(dep, views[dep])
            causes += dependency_cause.session_causes(dep, views[dep])
            held[dep] = dependency_cause.blocker_facts(views[dep])
    causes += [c for c in dependency_cause.text_causes({dep: dep for dep in watched}, evidence, error)
               if c not in causes]
    if texts:
        evidence["dependency_sessions"] = texts
    if any(held.values()):  # engine data (the autonomy table's end_idle_transaction), not the model's
        evidence["blocking_sessions"] = {dep: rows for dep, rows in held.items() if rows}
    states = dict(evidence.get("dependencies") or {}) if isinstance(evidence.get("dependencies"), Mapping) else {}
    for dep in watched:
        kind = dependency_cause.kinds(dep, causes)
        if kind:  # the kind of cause is part of the failure's signature (two causes, two plans)
            states[dep] = f"{states.get(dep) or 'healthy'}; CAUSE of {name}'s wait: {kind}"
    if states:
        evidence["dependencies"] = states
    evidence["degraded"] = dependency_cause.degraded_note(name, causes)
    return evidence


def waiting_on(depends: Mapping[str, str]) -> dict:
    """The dependencies (name -> state in this pass) still not working, which a dependent
    waits on instead of acting (it cannot be healed against a server that is down)."""
    return {dep: state for dep, state in depends.items() if state not in words.WORKING_STATES}
