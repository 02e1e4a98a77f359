# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An evidence budget that keeps causes: what of a host's evidence reaches the model.

The evidence is a list of ``(key, text)`` items. What the failure names (the paths, the
``FILE:LINE`` places and the quoted words of the health error and of the config test)
decides what is kept: an item that names one of them goes before one that does not, and
inside an item the lines that name one are kept whole before any other line. Items are
cut at line ends, never inside the line that matters; an item that does not fit is left
out whole and listed at the end with the read-only command that shows it, so the model
knows what it has not seen and how to ask for it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

_PATH = re.compile(r"(?<![\w/:.~-])(/(?:[\w.@+~=-]+/?)+)")
_PLACE = re.compile(r"(/[^\s:\"'(),;<>]+):(\d+)")
_QUOTED = re.compile(r"""["'`]([^"'`\s]{3,80})["'`]""")
# Words too common in failures to tell one line from another.
_COMMON = frozenset(("/etc", "/var", "/run", "/usr", "/bin", "/sbin", "/tmp", "/dev", "/lib"))
_MARK = "[... {n} line{s}, {c} chars cut ...]"


def failure_terms(error: str, evidence: Mapping | None = None) -> list[str]:
    """The strings the failure names, most specific first: ``FILE:LINE`` places, absolute
    paths and quoted words of the health error and of the config test (and the files the
    config context names), then the files the known-good drift names. Deduplicated, in the order
    first named."""
    texts = [str(error or "")]
    if isinstance(evidence, Mapping):
        texts.append(str(evidence.get("config_test") or ""))
        for context in evidence.get("config_context") or []:
            if isinstance(context, Mapping) and context.get("file"):
                texts.append("%s:%s" % (context["file"], context.get("line", "")))
    terms: list[str] = []
    drifted = []
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    for item in (known.get("drift") if isinstance(known, Mapping) else None) or []:
        if isinstance(item, Mapping):
            drifted += [str(p) for p in [item.get("path")] + list(item.get("same_file") or []) if p]
    for text in texts:
        found = [f"{m.group(1)}:{m.group(2)}" for m in _PLACE.finditer(text)]
        found += [m.group(1).rstrip("/.") for m in _PATH.finditer(text)]
        found += [m.group(1) for m in _QUOTED.finditer(text)]
        for term in found:
            if len(term) >= 3 and term not in _COMMON and term not in terms:
                terms.append(term)
    # then the files that drifted from the last healthy pass: the prime suspects when the
    # failure names none (what the host says of who owns them, their paths, their includes)
    terms += [p for p in drifted if p not in terms and p not in _COMMON]
    return terms


def names_a_term(text: str, terms: Sequence[str]) -> bool:
    return any(term in text for term in terms)


def fit_lines(text: str, limit: int, terms: Sequence[str] = (), keep: str = "head") -> str:
    """``text`` within ``limit`` characters, cut only at line ends: the lines naming one of
    ``terms`` first (in their order), then the others from the head (``keep="tail"``: from
    the end, as logs are read), each gap marked with how many lines it holds. A single line
    longer than ``limit`` is the only one cut inside, and says so."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    order = [i for i, line in enumerate(lines) if names_a_term(line, terms)]
    rest = [i for i in range(len(lines)) if i not in set(order)]
    order += list(reversed(rest)) if keep == "tail" else rest
    kept: set[int] = set()
    used = 0
    reserve = 3 * (len(_MARK) + 12)  # the gap marks: before, between and after what is kept
    for index in order:
        size = len(lines[index]) + 1
        if used + size + reserve > limit:
            if not kept and index == order[0]:
                # one line longer than everything: keep its start, say it was cut
                room = max(0, limit - 40)
                return lines[index][:room] + f" [... {len(lines[index]) - room} chars cut]"
            continue
        kept.add(index)
        used += size
    text = _with_gaps(lines, kept)
    # more gaps than reserved for: give up the last kept lines that name nothing
    droppable = [i for i in reversed(order) if i in kept and not names_a_term(lines[i], terms)]
    while len(text) > limit and droppable:
        kept.discard(droppable.pop(0))
        text = _with_gaps(lines, kept)
    return text


def _with_gaps(lines: list[str], kept: set[int]) -> str:
    out, gap, chars = [], 0, 0
    for index, line in enumerate(lines + [None]):
        if index in kept or line is None:
            if gap:
                out.append(_MARK.format(n=gap, s="" if gap == 1 else "s", c=chars))
                gap = chars = 0
            if line is not None:
                out.append(line)
        else:
            gap += 1
            chars += len(line) + 1
    return "\n".join(out)


def rank_items(items: Sequence[tuple[str, str]], terms: Sequence[str],
               first: Iterable[str] = (), always: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``items`` in the order to keep them: the keys in ``always`` (the owner's word), the keys
    in ``first`` that name a term, then any other item naming a term, then the rest; each group
    in the given order."""
    first, always = tuple(first), tuple(always)

    def rank(pair: tuple[int, tuple[str, str]]) -> tuple[int, int]:
        index, (key, text) = pair
        if key in always:
            return -1, index
        named = names_a_term(text, terms)
        if named and key in first:
            return 0, index
        return (1 if named else 2), index
    return [item for _i, item in sorted(enumerate(items), key=rank)]


def ask_for(key: str, service: str, init: str = "") -> str:
    """A read-only command that shows the evidence item ``key`` left out (or "")."""
    if key == "journal" or (key == "status" and init == "systemd"):
        return f"`journalctl -u {service} -n 50 --no-pager`" if key == "journal" else f"`systemctl status {service}`"
    if key.startswith("logs") or key == "log":
        return "`tail -n 50 LOGFILE`"
    if key == "processes":
        return "`ps -eo pid,ppid,user,stat,lstart,args`"
    if key in ("unit", "other_units"):
        return f"`systemctl show {service}`"
    if key == "listeners":
        return "`ss -ltnp`"
    if key in ("named_paths", "paths", "pid_files", "ownership", "data_markers"):
        return "`stat PATH` or `ls -la DIR`"
    if key == "writer_records":
        return "`tail -n 20 LOGFILE` or `journalctl -t NAME -n 20 --no-pager`"
    if key in ("recent_changes", "includes", "environment", "config_context"):
        return "`cat FILE`"
    return ""


def render(items: Sequence[tuple[str, str]], budget: int, item_budget: int, terms: Sequence[str] = (),
           service: str = "", init: str = "", first: Iterable[str] = (), always: Iterable[str] = ()) -> str:
    """``### key`` sections within ``budget`` characters, ranked by :func:`rank_items` and
    each cut by :func:`fit_lines` (logs keep their end); what did not fit is listed at the end
    with how to ask for it. An item that names a term may use twice ``item_budget``."""
    sections, left_out = [], []
    remaining = budget
    for key, text in rank_items(items, terms, first, always):
        named = names_a_term(text, terms)
        room = min(item_budget * (2 if named else 1), remaining - len(key) - 5)
        keep = "tail" if "log" in key.lower() or key == "journal" else "head"
        if room < 120 or (not named and room < min(len(text), 400)):
            left_out.append((key, len(text)))
            continue
        body = fit_lines(text, room, terms, keep)
        remaining -= len(body) + len(key) + 5
        sections.append(f"### {key}\n{body}")
    if left_out:
        lines = ["### left out for size (ask with a read-only command if you need it)"]
        for key, size in left_out:
            how = ask_for(key, service, init)
            lines.append(f"- {key} ({size} chars)" + (f": {how}" if how else ""))
        sections.append("\n".join(lines))
    return "\n".join(sections)
