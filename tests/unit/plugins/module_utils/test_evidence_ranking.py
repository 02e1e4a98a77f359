"""The host-side budget ranks what it keeps by what the failure names."""
from __future__ import annotations

from pathlib import Path

from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence


def test_a_large_changed_file_keeps_the_line_the_error_names_among_many_sharing_its_words(tmp_path: Path):
    conf = tmp_path / "postgresql.conf"
    lines = [f"log_connection_setting_{n} = on  # shares words with the noisy log" for n in range(400)]
    lines[250] = "max_connections = 0"
    conf.write_text("\n".join(lines) + "\n")
    # the log names every setting's words; the error names the file and line 251
    hint = "\n".join([f"FATAL: invalid value in {conf}:251", "",
                      " ".join(f"log_connection_setting_{n}" for n in range(400))])
    recent = service_evidence.recent_config_changes({"config_paths": [str(tmp_path)]}, {}, files=[str(conf)], hint=hint)
    text = recent[str(conf)]
    assert "251: max_connections = 0" in text.splitlines()
    assert "modified 20" in text and "Z (" in text  # an absolute UTC time, then the age


def test_named_paths_rank_broken_and_error_named_ones_first():
    ranked = sorted([("/a", {"type": "file", "named_in": "log x"}),
                     ("/b", {"type": "missing", "named_in": "log x"}),
                     ("/c", {"type": "file", "named_in": "error"}),
                     ("/d", {"type": "missing", "named_in": "config_test"})],
                    key=lambda kv: service_evidence.path_rank(kv[1]))
    assert [k for k, _v in ranked] == ["/d", "/b", "/c", "/a"]


def test_a_named_file_brings_its_first_lines_and_its_owner(tmp_path: Path):
    conf = tmp_path / "50-hardening.conf"
    conf.write_text("# Managed by the security team (SEC-1042). DO NOT EDIT.\nPasswordAuthentication no\n")
    secret = tmp_path / "server.key"
    secret.write_text("-----BEGIN PRIVATE KEY-----\nabc\n")
    found = service_evidence.named_paths([("error", f"bad option in {conf}; cannot load {secret}")], None)
    assert found[str(conf)]["first_lines"] == ["# Managed by the security team (SEC-1042). DO NOT EDIT.",
                                               "PasswordAuthentication no"]
    assert found[str(conf)]["managed_by"] == ["says: line 1: # Managed by the security team (SEC-1042). DO NOT EDIT."]
    assert "first_lines" not in found[str(secret)]  # a key's content never travels
    owned = service_evidence.ownership_of([str(conf), str(secret)])
    assert owned == {str(conf): "says: line 1: # Managed by the security team (SEC-1042). DO NOT EDIT."}


def test_a_logs_fatal_line_is_kept_ahead_of_a_tail_that_would_cut_it_off():
    """A failed start logs its FATAL, then a long HINT, a shutdown and pg_ctl's own lines: a
    short tail keeps only those. The newest cause line is kept ahead of the tail."""
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence

    fatal = "2026-11-29 10:00:10 UTC [88] FATAL:  could not map anonymous shared memory: Cannot allocate memory"
    lines = [f"2026-11-29 10:00:0{i} UTC [1] LOG:  checkpoint starting" for i in range(9)] + [
        fatal, "2026-11-29 10:00:10 UTC [88] HINT:  " + "a long hint about memory, swap space or huge pages " * 6,
        "2026-11-29 10:00:10 UTC [88] LOG:  database system is shut down", "pg_ctl: could not start server"]
    kept = service_evidence.cause_kept("\n".join(lines), 300)
    assert kept.startswith(fatal) and kept.endswith("pg_ctl: could not start server")
    assert len(kept.encode()) <= 300
    # from the cause on, whole, when that fits; a log without a cause line is left to the tail cut
    assert service_evidence.cause_kept("\n".join(lines[:10] + lines[11:]), 250) == "\n".join(lines[9:10] + lines[11:])
    assert service_evidence.cause_kept("\n".join(lines[:9]), 100) == "\n".join(lines[:9])
