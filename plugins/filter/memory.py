# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over the workflow's episodic memory (docs in the sidecar .yml files)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory as _memory


def memory_lookup(memories, signature):
    """What the fleet remembers about one failure signature."""
    try:
        return _memory.lookup(memories, signature)
    except _memory.EpisodeError as exc:
        raise AnsibleFilterError(f"sentinel.remediation.memory_lookup: {exc}") from exc


def memory_append(memory, episode, max_episodes=_memory.DEFAULT_MAX_EPISODES):
    """A host's memory with one more episode, bounded to the newest max_episodes."""
    try:
        return _memory.append_episode(memory, episode, max_episodes)
    except _memory.EpisodeError as exc:
        raise AnsibleFilterError(f"sentinel.remediation.memory_append: {exc}") from exc


def corrupt_cache_files(directory):
    """Files of a jsonfile fact cache directory that ansible could not load."""
    if directory is not None and not isinstance(directory, str):
        raise AnsibleFilterError(
            f"sentinel.remediation.corrupt_cache_files: expected a directory path, got {type(directory).__name__}")
    return _memory.corrupt_cache_files(directory or "")


class FilterModule:
    """Episodic memory filters."""

    def filters(self):
        return {
            "memory_lookup": memory_lookup,
            "memory_append": memory_append,
            "corrupt_cache_files": corrupt_cache_files,
        }
