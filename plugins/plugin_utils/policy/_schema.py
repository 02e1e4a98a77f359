# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation of a policy document against the published schema (schema.json).

The schema is standard JSON Schema (draft 2020-12), so any validator can check a policy
file. The controller does not depend on one: this module reads the small subset the
schema uses (type, enum, pattern, format regex, minLength, minimum, maximum, required,
properties, additionalProperties, items, oneOf) and reports the first problem with the
dotted key it sits under, e.g. ``tools.ping.options.-c``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).with_name("schema.json")

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    with SCHEMA_FILE.open(encoding="utf-8") as handle:
        return json.load(handle)


def _where(path: str) -> str:
    return f"policy key '{path}'" if path else "the policy"


def _kind(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


def problems(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every problem of ``value`` against ``schema`` (the first ones are the most useful)."""
    if "oneOf" in schema:
        results = [problems(value, option, path) for option in schema["oneOf"]]
        if any(not r for r in results):
            return []
        typed = [r for r, option in zip(results, schema["oneOf"]) if _type_ok(value, option)]
        if typed:
            return typed[0]
        kinds = sorted({str(o.get("type")) for o in schema["oneOf"]})
        return [f"{_where(path)} must be one of: {', '.join(kinds)} (found {_kind(value)})"]
    wanted = schema.get("type")
    if wanted is not None and not _type_ok(value, schema):
        names = wanted if isinstance(wanted, list) else [wanted]
        return [f"{_where(path)} must be {' or '.join(names)}, not {_kind(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        shown = ", ".join(json.dumps(v) for v in schema["enum"])
        return [f"{_where(path)} must be one of {shown}, not {json.dumps(value, default=str)}"]
    found: list[str] = []
    if isinstance(value, str):
        if len(value) < int(schema.get("minLength", 0)):
            found.append(f"{_where(path)} must not be empty")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{_where(path)} holds {value!r}, which does not match {schema['pattern']}")
        if schema.get("format") == "regex":
            try:
                re.compile(value)
            except re.error as exc:
                found.append(f"{_where(path)} is not a valid regular expression ({exc})")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(f"{_where(path)} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            found.append(f"{_where(path)} must be at most {schema['maximum']}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found.extend(problems(item, schema["items"], f"{path}[{index}]"))
    if isinstance(value, Mapping):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                found.append(f"{_where(path + '.' + key if path else key)} is missing (override it, do not delete it)")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str):
                found.append(f"{_where(path)} has the key {key!r}, which is not a string")
            elif key in props:
                found.extend(problems(item, props[key], where))
            elif extra is False:
                known = ", ".join(sorted(props))
                found.append(f"unknown {_where(where)} (known here: {known})")
            elif isinstance(extra, Mapping):
                found.extend(problems(item, extra, where))
    return found


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    wanted = schema.get("type")
    if wanted is None:
        return True
    names = wanted if isinstance(wanted, list) else [wanted]
    return any(_TYPES[name](value) for name in names)


def validate(document: Any) -> list[str]:
    """Problems of a whole (merged) policy document; empty when it is valid."""
    return problems(document, load_schema())
