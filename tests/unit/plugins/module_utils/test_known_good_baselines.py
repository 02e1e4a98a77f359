# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known-good baselines on the host: recorded while healthy, compared at an incident, with a
redacted diff, the bad version kept aside and the good one staged with its mode."""
from __future__ import annotations

import hashlib
import os
import stat

from ansible_collections.sentinel.remediation.plugins.module_utils import known_good


def _no_systemctl(_argv):
    return 1, ""


def _service(tmp_path):
    conf = tmp_path / "etc" / "app"
    conf.mkdir(parents=True)
    (conf / "app.conf").write_text("listen 80;\npassword = hunter2hunter2\nworkers 4;\n")
    (conf / "extra.conf").write_text("gzip on;\n")
    return {"name": "app", "units": [], "config_paths": [str(conf)], "config_test": []}, conf


def _pass(defn, root, healthy):
    return known_good.record_or_compare(defn, healthy, str(root), "sysv", _no_systemctl)


def test_a_healthy_pass_records_hashes_and_keeps_content_only_when_it_changed(tmp_path):
    defn, conf = _service(tmp_path)
    root = tmp_path / "kg"
    first = _pass(defn, root, True)
    assert first["files"] == 2 and len(first["changed"]) == 2
    assert stat.S_IMODE(os.stat(root / "known-good").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(root / "content").st_mode) == 0o700
    assert _pass(defn, root, True)["changed"] == []          # unchanged: nothing rewritten
    os.utime(conf / "extra.conf", (1, 1))                    # a new mtime alone is no change
    assert _pass(defn, root, True)["changed"] == []
    objects = sorted(p.name for p in (root / "content" / "objects").rglob("*") if p.is_file())
    assert len(objects) == 2                                 # in the host's one content store


def test_a_healthy_pass_keeps_its_baseline_content_young_so_pruning_by_age_keeps_it(tmp_path):
    defn, _conf = _service(tmp_path)
    root = tmp_path / "kg"
    _pass(defn, root, True)
    objects = [p for p in (root / "content" / "objects").rglob("*") if p.is_file()]
    for path in objects:
        os.utime(path, (1, 1))                               # as if stored long ago
    _pass(defn, root, True)                                  # unchanged, still in use
    store = known_good.Baselines(str(root)).store
    assert store.prune(10 ** 9, 3600) == 0
    assert all(p.exists() for p in objects)


def test_drift_gives_a_redacted_diff_keeps_the_bad_version_aside_and_stages_the_good_one(tmp_path):
    defn, conf = _service(tmp_path)
    root = tmp_path / "kg"
    _pass(defn, root, True)
    os.chmod(conf / "app.conf", 0o640)
    good = (conf / "app.conf").read_bytes()
    (conf / "app.conf").write_text("listen 8O;\npassword = hunter2hunter2\nworkers 4;\n")
    drift = _pass(defn, root, False)
    assert drift["files"] == 2
    [item] = drift["drift"]
    assert item["path"] == str(conf / "app.conf") and item["change"] == "modified"
    assert "-listen 80;" in item["diff"] and "+listen 8O;" in item["diff"]
    assert "hunter2hunter2" not in item["diff"]
    bad = (conf / "app.conf").read_bytes()
    assert item["aside"] == hashlib.sha256(bad).hexdigest()
    store = known_good.Baselines(str(root)).store
    assert store.get(item["aside"]) == bad                    # kept, not deleted
    staged = item["restore"]
    assert open(staged, "rb").read() == good
    assert stat.S_IMODE(os.stat(staged).st_mode) == 0o644    # the known-good mode, not today's 0640


def test_an_unhealthy_pass_never_rewrites_the_baseline(tmp_path):
    defn, conf = _service(tmp_path)
    root = tmp_path / "kg"
    _pass(defn, root, True)
    before = known_good.Baselines(str(root)).manifest("app")
    (conf / "app.conf").write_text("broken\n")
    _pass(defn, root, False)
    _pass(defn, root, False)
    assert known_good.Baselines(str(root)).manifest("app") == before


def test_a_missing_file_is_drift_with_its_known_good_content_staged(tmp_path):
    defn, conf = _service(tmp_path)
    root = tmp_path / "kg"
    _pass(defn, root, True)
    (conf / "extra.conf").unlink()
    [item] = _pass(defn, root, False)["drift"]
    assert item["change"] == "missing" and "-gzip on;" in item["diff"]
    assert open(item["restore"], "rb").read() == b"gzip on;\n"


def test_no_baseline_means_no_drift_section(tmp_path):
    defn, _conf = _service(tmp_path)
    assert _pass(defn, tmp_path / "kg", False) == {}


def test_dpkg_says_whether_a_conffile_is_the_package_default(tmp_path):
    conf = tmp_path / "nginx.conf"
    conf.write_bytes(b"user www-data;\n")
    status = tmp_path / "status"
    digest = hashlib.md5(b"user www-data;\n").hexdigest()
    status.write_text("Package: nginx-common\nStatus: install ok installed\nConffiles:\n %s %s\n %s 0123 obsolete\n\n"
                      "Package: other\nVersion: 1\n" % (conf, digest, tmp_path / "old"))
    files = known_good.dpkg_conffiles(str(status))
    assert set(files) == {str(conf)}
    assert "the package's default (nginx-common" in known_good.package_default_line(str(conf), files)
    conf.write_bytes(b"user nobody;\n")
    assert "differs from the package's default (nginx-common)" in known_good.package_default_line(str(conf), files)
    assert known_good.package_default_line("/etc/unknown", files) == ""


def test_a_relative_directory_is_refused_with_its_name(tmp_path):
    defn, _conf = _service(tmp_path)
    result = known_good.record_or_compare(defn, True, "relative/dir", "sysv", _no_systemctl)
    assert "must be an absolute path" in result["error"] and "relative/dir" in result["error"]


def test_a_new_file_that_copies_an_unchanged_known_good_file_says_so_and_takes_out_no_setting(tmp_path):
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import known_good_plan
    defn, conf = _service(tmp_path)
    (conf / "tls.conf").write_text("ssl_certificate /etc/ssl/app.pem;\nssl_verify_client on;\n")
    root = tmp_path / "kg"
    _pass(defn, root, True)
    (conf / "tls.conf.bak").write_bytes((conf / "tls.conf").read_bytes())     # `cp tls.conf tls.conf.bak`
    (conf / "tls-new.conf").write_text("ssl_verify_client on;\n")             # a new setting of its own
    items = {i["path"]: i for i in _pass(defn, root, False)["drift"]}
    copy, own = items[str(conf / "tls.conf.bak")], items[str(conf / "tls-new.conf")]
    assert copy["change"] == "new" and copy["copy_of"] == str(conf / "tls.conf")
    assert "copy_of" not in own
    assert known_good_plan.weakens_security(copy["diff"])       # its lines speak of TLS...
    assert not known_good_plan.takes_out_security(copy)        # ...and every one of them stays in effect
    assert known_good_plan.takes_out_security(own)
    assert known_good_plan.restorable(copy) and not known_good_plan.restorable(own)
    # The original changed since: the copy holds the known-good text the original no longer has.
    (conf / "tls.conf").write_text("ssl_certificate /etc/ssl/app.pem;\n")
    items = {i["path"]: i for i in _pass(defn, root, False)["drift"]}
    assert "copy_of" not in items[str(conf / "tls.conf.bak")]
    assert known_good_plan.takes_out_security(items[str(conf / "tls.conf.bak")])


def test_a_long_diff_keeps_the_lines_that_set_something_before_comments():
    """A rewrite that dropped every comment of a long file and added one setting at its end (what
    a server's own config rewrite does): the added setting is in the diff, the comments are
    counted, not shown."""
    before = "\n".join([f"# comment line {i} explaining a setting at some length" for i in range(80)]
                       + ["bind 127.0.0.1", "port 6379"]).encode()
    after = b"bind 127.0.0.1\nport 6379\nreplicaof 10.20.0.31 6379\n"
    diff = known_good.unified_diff("/etc/redis/redis.conf", before, after)
    assert "+replicaof 10.20.0.31 6379" in diff
    assert "(80 removed comment or blank lines left out)" in diff and "# comment line 5" not in diff
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.known_good_plan import weakens_security
    assert weakens_security(diff)  # not the whole diff: going back is a human's call, as for a cut one
    short = known_good.unified_diff("/etc/x.conf", b"# a\nport 1\n", b"# b\nport 2\n")
    assert "-# a" in short and "+port 2" in short  # a short diff is shown whole
