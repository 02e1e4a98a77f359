"""What the request shows of the sections that say when a file drifted, what a data directory
holds and which wording a missing object was named in; the engine's list of environment files
stays out of it."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import render_evidence

EVIDENCE = {
    "init": "sysv",
    "known_good": {"recorded": 1, "files": 3, "last_seen_good": "2026-11-29T08:00:00Z",
                   "drift": [{"path": "/etc/redis/redis.conf", "change": "modified", "mtime": "2026-11-29T08:31:00Z",
                              "ctime": "2026-11-29T08:31:00Z", "package_of": "redis-server",
                              "diff": "--- known-good\n+++ now\n@@ -1 +1 @@\n-port 6379\n+port 6380"}],
                   "window_records": ["2026-11-29T08:31:00Z sudo: alice : USER=root ; "
                                      "COMMAND=/usr/bin/tee -a /etc/redis/redis.conf [auth.log]"]},
    "data_markers": {"/var/lib/postgresql/15/main/PG_VERSION": "owner postgres:postgres, mode 0600, 3 bytes, "
                                                               "modified 2026-11-29T03:04:00Z: 14"},
    "environment_files": ["/etc/sysconfig/redis-server"],
    "missing_objects": "app's errors say, in SQLite's wording, that these do not exist: table visits",
}


def test_the_new_sections_reach_the_request_and_the_engines_list_does_not():
    text = render_evidence(EVIDENCE, error="redis-server is not running", service="redis-server")
    assert "### known_good" in text and "COMMAND=/usr/bin/tee -a /etc/redis/redis.conf" in text
    assert '"last_seen_good": "2026-11-29T08:00:00Z"' in text and '"package_of": "redis-server"' in text
    assert "### data_markers" in text and "PG_VERSION: owner postgres:postgres, mode 0600" in text
    assert "### missing_objects" in text and "in SQLite's wording" in text
    assert "environment_files" not in text and "/etc/sysconfig/redis-server" not in text
