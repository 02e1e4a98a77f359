# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known-good drift told once per file (a link and what it names are one entry) and a file new
since the healthy pass shown whole, as a diff against nothing (redacted, bounded)."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils import known_good
from ansible_collections.sentinel.remediation.plugins.plugin_utils.autonomy import _drift


def _pass(defn, root, healthy):
    return known_good.record_or_compare(defn, healthy, str(root), "sysv", lambda _argv: (1, ""))


def _site(tmp_path):
    conf = tmp_path / "etc" / "web"
    (conf / "sites-available").mkdir(parents=True)
    (conf / "sites-enabled").mkdir()
    (conf / "snippets").mkdir()
    (conf / "sites-available" / "default").write_text("listen 443 ssl;\nssl_protocols TLSv1.2 TLSv1.3;\nroot /srv;\n")
    (conf / "sites-enabled" / "default").symlink_to(conf / "sites-available" / "default")
    return {"name": "web", "units": [], "config_paths": [str(conf)], "config_test": []}, conf


def test_a_link_and_the_file_it_names_drift_as_one_entry_naming_both_paths(tmp_path):
    defn, conf = _site(tmp_path)
    root = tmp_path / "kg"
    assert _pass(defn, root, True)["files"] == 2          # both paths are watched
    real = conf / "sites-available" / "default"
    real.write_text("listen 443 ssl;\ninclude snippets/tls.conf;\nroot /srv;\n")
    drift = _pass(defn, root, False)["drift"]
    modified = [d for d in drift if d["change"] == "modified"]
    assert len(modified) == 1, drift
    assert modified[0]["path"] == str(real)
    assert modified[0]["same_file"] == [str(conf / "sites-enabled" / "default")]
    assert "+include snippets/tls.conf;" in modified[0]["diff"]
    # the policy finds the entry by either path
    found = _drift({"known_good": {"drift": drift}})
    assert found[str(real)] is found[str(conf / "sites-enabled" / "default")]


def test_two_files_with_the_same_change_that_are_not_one_file_stay_two_entries(tmp_path):
    defn, conf = _site(tmp_path)
    (conf / "sites-enabled" / "default").unlink()
    (conf / "sites-enabled" / "default").write_text((conf / "sites-available" / "default").read_text())
    root = tmp_path / "kg"
    _pass(defn, root, True)
    for path in (conf / "sites-available" / "default", conf / "sites-enabled" / "default"):
        path.write_text("listen 8443 ssl;\n")
    drift = _pass(defn, root, False)["drift"]
    assert len([d for d in drift if d["change"] == "modified"]) == 2
    assert not [d for d in drift if d.get("same_file")]


def test_a_file_new_since_the_healthy_pass_shows_its_content_redacted_as_a_diff_against_nothing(tmp_path):
    defn, conf = _site(tmp_path)
    root = tmp_path / "kg"
    _pass(defn, root, True)
    (conf / "snippets" / "tls.conf").write_text("# SEC-1: profile\nssl_protocols TLSv1.2;\n"
                                                "password = hunter2hunter2\n")
    drift = _pass(defn, root, False)["drift"]
    new = next(d for d in drift if d["change"] == "new")
    assert new["path"] == str(conf / "snippets" / "tls.conf")
    diff = new["diff"]
    assert "known-good (none: new since the healthy pass)" in diff.splitlines()[0]
    assert "+ssl_protocols TLSv1.2;" in diff and "+# SEC-1: profile" in diff
    assert "hunter2hunter2" not in diff
    assert len(diff) <= known_good.DIFF_MAX + 60
