# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Account tools: the one account change a remediation makes is a service account's
membership of the group its own files need. See ``_tools`` for the conventions.

`usermod -aG GROUP USER`, `gpasswd -a USER GROUP` and `adduser USER GROUP` add USER to
GROUP. That is a scoped change (a human approves it) only when USER is the incident's
service account, GROUP is not one of the policy's ``privileged_groups``, and the host says
why USER needs GROUP: GROUP owns a path of the service (a declared path, or one its own
errors name) with access for the group, or USER was in GROUP at the service's last healthy
pass (its known-good baseline; the autonomy table may then let the restore run alone). The
verdict declares the account files it rewrites (``/etc/group``, ``/etc/gshadow``), so the host
keeps them before it runs and puts them back when the attempt does not heal. Every other form (creating or removing users, removing a
membership, replacing the group list, passwords, shells, homes, locks) stays refused with
the account tools' reason.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._rules import Check, q

_ACCOUNT = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\$?$")
_GROUP = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")


def _refuse(chk: Check, why: str = "") -> None:
    chk.reject(f"`{chk.tool}` edits accounts, passwords, groups or sudo rights; a human does that"
               + (f" ({why})" if why else ""))


def _usermod(args: list[str]) -> tuple[str, list[str]] | str:
    """(user, groups) of `usermod -a -G G[,G...] USER`, or why the form is not an addition."""
    append, groups, rest = False, None, []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            rest.extend(args[i:])
            break
        if word in ("-a", "--append"):
            append = True
        elif word in ("-G", "--groups") and i < len(args):
            groups, i = args[i], i + 1
        elif word.startswith("--groups="):
            groups = word.partition("=")[2]
        elif re.fullmatch(r"-aG|-Ga", word) and i < len(args):
            append, groups, i = True, args[i], i + 1
        elif re.fullmatch(r"-aG.+", word):
            append, groups = True, word[3:]
        elif word.startswith("-"):
            return f"`usermod {word}` changes more than a group membership"
        else:
            rest.append(word)
    if groups is None or not append:
        return "`usermod -G` without `-a` replaces every supplementary group (memberships are lost)"
    if len(rest) != 1:
        return "name one account"
    return rest[0], groups.split(",")


def _gpasswd(args: list[str]) -> tuple[str, list[str]] | str:
    words = [a for a in args if a != "--"]
    if len(words) == 3 and words[0] in ("-a", "--add"):
        return words[1], [words[2]]
    return "only `gpasswd -a USER GROUP` adds a member; its other forms remove members or change administrators"


def _adduser(args: list[str]) -> tuple[str, list[str]] | str:
    words = [a for a in args if a not in ("-q", "--quiet", "--")]
    if len(words) == 2 and not any(w.startswith("-") for w in words):
        return words[0], [words[1]]
    return "only `adduser USER GROUP` (an existing account into an existing group) is a membership change"


_FORMS = {"usermod": _usermod, "gpasswd": _gpasswd, "adduser": _adduser}


def group_membership(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    form = _FORMS.get(chk.tool)
    found = form(args) if form is not None else "not a membership tool"
    if isinstance(found, str):
        _refuse(chk, found)
        return
    user, groups = found
    scope = chk.scope
    if not _ACCOUNT.match(user) or not all(_GROUP.match(g) for g in groups) or not groups:
        _refuse(chk, f"{q(user)} or {q(','.join(groups))} is not an account or group name")
        return
    if not scope.explicit or user not in scope.users or user == "root":
        _refuse(chk, f"{q(user)} is not the incident's service account")
        return
    privileged = set(chk.policy.get("privileged_groups") or ())
    chk.become = True
    for group in groups:
        if group in privileged:
            _refuse(chk, f"{q(group)} grants powers beyond one service's files (privileged_groups)")
            return
        owned = scope.path_groups.get(group)
        held = group in scope.known_good_groups.get(user, ())
        if owned is None and not held:
            _refuse(chk, f"the host's evidence shows no path of {scope.service} owned by group {q(group)}, and "
                         f"{user} was not in it at the last healthy pass")
            return
        # Said without a path at its end: the kernel's rules read "VERB /path" effects as changes.
        why = f"{owned} is owned by that group" if owned is not None else \
            f"a membership {user} held at the last healthy pass"
        chk.effect(f"adds {user} to group {group} ({why})")
    # gpasswd and usermod write a new copy beside each account file and rename it over.
    chk.effect("rewrites /etc/group")
    chk.effect("rewrites /etc/gshadow")
    chk.approve(f"adding {user}, the account of {scope.service}, to {', '.join(groups)} changes an account (the "
                "service needs a restart to gain it); a human should confirm")


RULES = {"group_membership": group_membership}
