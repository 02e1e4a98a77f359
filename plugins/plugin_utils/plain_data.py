# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Templated values as plain Python data, for a check that only reads them.

Ansible hands an action its variables as tagged containers and strings (where each value came
from, whether it may be templated). Ansible's argument-spec validation deep-copies what it
validates; copying tagged values goes through each object's reduce protocol and cost the heal
action about a tenth of a CPU second per host (bench/fleet.py, stop 34), more than the rest
of its controller work. A check that only reads the values (the role's argument spec: its
error messages) validates this plain copy instead: same values, same types as far as a spec
can tell (a tagged ``str`` is a ``str``), none of the tags.
"""
from __future__ import annotations

from collections.abc import Mapping


def plain(value):
    """``value`` rebuilt from the exact built-in types: mappings as ``dict``, lists and tuples
    as ``list``/``tuple``, strings, numbers and booleans as ``str``/``int``/``float``/``bool``.
    Anything else (a type a spec would reject, say) is kept as it is, for the check to name."""
    if value is None or type(value) is bool:  # pylint: disable=unidiomatic-typecheck
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
