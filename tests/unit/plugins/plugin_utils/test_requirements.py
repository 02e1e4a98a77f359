"""A missing controller library is named with the pip package that provides it."""
from __future__ import annotations

import builtins
import sys

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import knowledge
from ansible_collections.sentinel.remediation.plugins.plugin_utils.requirements import missing_package


@pytest.mark.parametrize("module, package", [("rank_bm25", "rank-bm25"), ("tree_sitter_bash", "tree-sitter-bash"),
                                             ("openai", "openai"), ("redis", "redis")])
def test_the_message_names_the_pip_package(module, package):
    assert f"pip install {package}" in missing_package(module)


def test_ranking_without_rank_bm25_is_a_knowledge_error_naming_the_package(monkeypatch):
    real_import = builtins.__import__

    def no_bm25(name, *args, **kwargs):
        if name == "rank_bm25":
            raise ImportError("No module named 'rank_bm25'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "rank_bm25", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_bm25)
    with pytest.raises(knowledge.KnowledgeError, match="pip install rank-bm25"):
        knowledge._bm25([{"a": 1}], [1])  # pylint: disable=protected-access
