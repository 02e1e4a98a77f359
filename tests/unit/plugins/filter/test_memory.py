"""Unit tests for the memory filters (plugins/filter/memory.py)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.filter.memory import FilterModule

FILTERS = FilterModule().filters()
SIG = "redis-server:0123456789abcdef"


def test_filters_are_registered():
    assert set(FILTERS) == {"memory_lookup", "memory_append", "corrupt_cache_files"}


def test_append_then_lookup_round_trip():
    ep = {"signature": SIG, "service": "redis-server", "success": True,
          "commands": [{"command": "service redis-server start", "source": "runbook", "rc": 0}]}
    mem = FILTERS["memory_append"]([], ep, 2)
    mem = FILTERS["memory_append"](mem, ep, 2)
    mem = FILTERS["memory_append"](mem, ep, 2)
    assert len(mem) == 2
    found = FILTERS["memory_lookup"]([mem, "corrupt"], SIG)
    assert found["successes"][0]["commands"] == ["service redis-server start"]


@pytest.mark.parametrize("name, args", [
    ("memory_lookup", ([], None)),
    ("memory_append", ([], {"no": "signature"})),
    ("memory_append", ([], {"signature": SIG}, "many")),
    ("corrupt_cache_files", (42,)),
])
def test_errors_name_the_filter(name, args):
    with pytest.raises(AnsibleFilterError, match=f"sentinel.remediation.{name}"):
        FILTERS[name](*args)
