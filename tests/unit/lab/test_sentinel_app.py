"""The lab's own app (lab/image/common/rootfs/usr/local/lib/sentinel-app/sentinel_app.py) and the health
check's parsing, outside a container: the app runs for real on a loopback port."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import importlib.util
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
APP = REPO / "lab" / "image" / "common" / "rootfs" / "usr" / "local" / "lib" / "sentinel-app" / "sentinel_app.py"
sys.path.insert(0, str(REPO / "lab"))

import lab_health  # noqa: E402

_loader = SourceFileLoader("sentinel_app", str(APP))
app = importlib.util.module_from_spec(importlib.util.spec_from_loader("sentinel_app", _loader))
_loader.exec_module(app)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp_path: Path, listen: str, storage: Path) -> Path:
    # A database port nothing listens on: the app must say so, not hang or crash.
    path = tmp_path / "app.conf"
    path.write_text(
        f"[server]\nlisten = {listen}\n[database]\ndsn = host=127.0.0.1 port={_free_port()} dbname=x user=x "
        f"password=secret connect_timeout=2\n[storage]\ndir = {storage}\n",
        encoding="utf-8",
    )
    return path


def test_config_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    with pytest.raises(app.ConfigError, match=r"cannot read .*missing.conf: No such file or directory"):
        app.read_config(str(tmp_path / "missing.conf"))
    bad = _config(tmp_path, "127.0.0.1:80800", tmp_path)
    with pytest.raises(app.ConfigError, match=r"listen must be HOST:PORT, got '127.0.0.1:80800'"):
        app.read_config(str(bad))


def test_storage_check_writes_a_fresh_file_and_removes_it(tmp_path: Path) -> None:
    assert app.check_storage(str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []
    assert "No such file or directory" in app.check_storage(str(tmp_path / "gone"))


def test_health_says_503_and_why_when_the_database_is_away() -> None:
    # As root, the app runs as nobody (it refuses root), from a directory nobody can read.
    base = Path(tempfile.mkdtemp(prefix="sentinel-app-test-"))
    storage = base / "storage"
    storage.mkdir()
    base.chmod(0o755)
    storage.chmod(0o777)
    port = _free_port()
    config = _config(base, f"127.0.0.1:{port}", storage)
    config.chmod(0o644)
    argv = ["/usr/bin/python3", str(base / "sentinel-app"), "--config", str(config)]
    shutil.copy(APP, base / "sentinel-app")
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        body = None
        for _attempt in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
            except urllib.error.HTTPError as exc:
                body = json.loads(exc.read())
                assert exc.code == 503
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.1)
        assert body and body["status"] == "unavailable" and body["storage"] == "ok" and body["database"] != "ok"
        assert "secret" not in json.dumps(body)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def test_the_app_refuses_to_run_as_root_or_on_a_bad_config(tmp_path: Path) -> None:
    config = _config(tmp_path, "127.0.0.1:80800", tmp_path)
    proc = subprocess.run([sys.executable, str(APP), "--config", str(config)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 1
    assert "fatal:" in proc.stderr and "Traceback" not in proc.stderr


def test_check_mode_reports_the_database_problem(tmp_path: Path) -> None:
    config = _config(tmp_path, "127.0.0.1:8080", tmp_path)
    proc = subprocess.run([sys.executable, str(APP), "--config", str(config), "--check"], capture_output=True,
                          text=True, timeout=30, check=False)
    assert proc.returncode == 1
    assert f"configuration {config} has problems" in proc.stdout


def test_listeners_are_parsed_with_their_processes() -> None:
    out = (
        'LISTEN 0 511 0.0.0.0:80 0.0.0.0:* users:(("nginx",pid=46,fd=5),("nginx",pid=47,fd=5))\n'
        "LISTEN 0 244 127.0.0.1:5432 0.0.0.0:*\n"
    )
    assert lab_health.parse_listeners(out) == [("0.0.0.0:80", [("nginx", 46), ("nginx", 47)]), ("127.0.0.1:5432", [])]
    assert lab_health.describe(lab_health.parse_listeners(out)) == "0.0.0.0:80 by nginx; 127.0.0.1:5432 by an unknown process"
