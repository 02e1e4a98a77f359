# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to say when a controller library the collection needs is missing.

The plugins' documentation lists them under ``requirements:``; an installed collection
does not bring Python packages, so a missing one is named with the pip package to install
(the import name is not always the package name: ``rank_bm25`` is ``rank-bm25``).
"""
from __future__ import annotations

# import name -> (pip package, what it is needed for)
CONTROLLER_PACKAGES = {
    "openai": ("openai", "to ask an LLM for a plan"),
    "rank_bm25": ("rank-bm25", "to rank runbook and document passages"),
    "tree_sitter": ("tree-sitter", "for the safety policy's shell parser"),
    "tree_sitter_bash": ("tree-sitter-bash", "for the safety policy's shell parser"),
    "redis": ("redis", "for the Redis fact cache's leases and shared plans"),
}


def missing_package(module: str) -> str:
    """One sentence naming the pip package of ``module`` and why it is needed."""
    package, purpose = CONTROLLER_PACKAGES.get(module, (module, "by sentinel.remediation"))
    return (f"the Python package {package} is not installed on the controller, needed {purpose} "
            f"(pip install {package}, in the Python that runs ansible)")
