# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec of a controller-side action, read from its docs-only module stub, so the
documentation ansible-doc prints and the checks the action applies can never drift apart."""
from __future__ import annotations

import copy
import functools

import yaml

from ansible_collections.sentinel.remediation.plugins.doc_fragments.llm import ModuleDocFragment as LLMDocFragment

_SPEC_KEYS = ("type", "required", "default", "choices", "elements", "no_log", "aliases")


def _entry(doc: dict) -> dict:
    entry = {key: doc[key] for key in _SPEC_KEYS if key in doc}
    if "suboptions" in doc:
        entry["options"] = {name: _entry(sub) for name, sub in doc["suboptions"].items()}
    return entry


# libyaml's loader when PyYAML has it: these documents are parsed in every worker process.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str):
    """``yaml.safe_load`` through libyaml when available (same results, several times faster)."""
    return yaml.load(text, Loader=SAFE_LOADER)  # nosec B506 - a safe loader


@functools.lru_cache(maxsize=32)
def _parsed_spec(documentation: str) -> dict:
    return {name: _entry(doc) for name, doc in load_yaml(documentation)["options"].items()}


def from_documentation(documentation: str) -> dict:
    """``validate_argument_spec``'s spec for the options of a DOCUMENTATION string (parsed once
    per process; each caller gets its own copy)."""
    return copy.deepcopy(_parsed_spec(documentation))


def llm_option_spec() -> dict:
    """The argument spec of the ``llm`` option the plan and heal actions share (documented once,
    in the ``sentinel.remediation.llm`` doc fragment); the API key is never logged."""
    spec = from_documentation(LLMDocFragment.DOCUMENTATION)["llm"]
    spec["options"]["api_key"]["no_log"] = True
    return spec
