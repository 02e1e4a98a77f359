# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The subcommand table's verdict on one command (``service_cli``: data the user extends)."""
from __future__ import annotations

from .. import service_cli
from . import _rules as judge
from ._rules import Check


def by_table(chk: Check, tool: str, words: list[str], in_scope: bool, service: str,
             unit: str | None = None) -> service_cli.Entry | None:
    """Judge a subcommand the subcommand table (``service_cli``) knows and return its entry;
    None when the table does not know it (the tool's own rules then decide). A unit class
    (``reload``, ``stop``...) is judged as that action on ``unit``, the service's own unit;
    a tool without one takes ``stop`` as needing approval and the others as ``scope``."""
    try:
        entry = service_cli.lookup(tool, words, chk.policy.get("service_subcommands"))
    except service_cli.TableError as exc:
        chk.reject(str(exc))
        return service_cli.Entry(" ".join(words), "refuse", str(exc))
    if entry is None:
        return None
    shown = f"`{tool} {entry.words}`"
    if entry.cls == "refuse":
        chk.reject(f"{shown} {entry.does}; refused")
        return entry
    chk.effect(entry.does)
    cls = entry.cls
    if cls in service_cli.UNIT_CLASSES and unit is not None:
        judge.unit(chk, unit, cls, shown_verb=f"{tool} {entry.words}")
        return entry
    if cls in service_cli.UNIT_CLASSES:
        cls = "approve" if cls == "stop" else "scope"
    if cls == "approve":
        chk.approve(f"{shown} {entry.does}; a human should confirm")
    elif cls == "scope" and not in_scope:
        chk.approve(f"{shown} {entry.does}, and {service} is not part of this incident; a human should confirm")
    return entry
