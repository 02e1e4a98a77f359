"""Where a run keeps its state: the default, the writability check, never inside an installed collection."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import state_dir


def test_the_configured_directory_wins_and_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert state_dir.artifacts_dir("mine", {"SENTINEL_STATE_DIR": "/elsewhere"}) == str(tmp_path / "mine")


@pytest.mark.parametrize("env, expected", [
    ({"SENTINEL_STATE_DIR": "/srv/state", "XDG_STATE_HOME": "/x"}, "/srv/state/remediation"),
    ({"XDG_STATE_HOME": "/x"}, "/x/sentinel-remediation/remediation"),
    ({}, os.path.expanduser("~/.local/state/sentinel-remediation/remediation")),
])
def test_the_default_follows_sentinel_state_dir_then_xdg_state_home_then_home(env, expected):
    assert state_dir.artifacts_dir("", env) == expected


def test_a_missing_directory_is_created_private(tmp_path):
    target = tmp_path / "a" / "b"
    assert state_dir.ensure_writable(str(target)) == str(target)
    assert target.is_dir() and (target.stat().st_mode & 0o777) == 0o700
    assert list(target.iterdir()) == []   # the write check leaves nothing behind


def test_an_unwritable_directory_is_named_with_what_to_set(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    with pytest.raises(state_dir.StateDirError) as caught:
        state_dir.ensure_writable(str(blocker / "state"))
    message = str(caught.value)
    assert str(blocker / "state") in message and "remediate_artifacts_dir" in message and "SENTINEL_STATE_DIR" in message


def test_a_directory_inside_an_installed_collection_is_refused_even_when_writable(tmp_path):
    collection = tmp_path / "ansible_collections" / "sentinel" / "remediation"
    collection.mkdir(parents=True)
    (collection / "MANIFEST.json").write_text(json.dumps({"collection_info": {}}), encoding="utf-8")
    assert state_dir.installed_collection_root(str(collection)) == str(collection)
    with pytest.raises(state_dir.StateDirError, match="inside the installed collection"):
        state_dir.ensure_writable(str(collection / ".cache" / "remediation"), collection=str(collection))
    assert not (collection / ".cache").exists()
    # Beside it is fine.
    assert state_dir.ensure_writable(str(tmp_path / "state"), collection=str(collection))


def test_a_checkout_is_not_an_installed_collection(tmp_path):
    (tmp_path / "galaxy.yml").write_text("namespace: sentinel\n", encoding="utf-8")
    assert state_dir.installed_collection_root(str(tmp_path)) is None


@pytest.mark.parametrize("plugin", [None, "memory", "ansible.builtin.memory"])
def test_a_memory_fact_cache_is_warned_about(plugin):
    assert "lost" in state_dir.volatile_cache_warning(plugin)


@pytest.mark.parametrize("plugin", ["sentinel.remediation.jsonfile", "jsonfile", "community.general.redis"])
def test_a_persistent_fact_cache_is_not_warned_about(plugin):
    assert state_dir.volatile_cache_warning(plugin) is None
