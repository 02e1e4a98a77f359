"""The HTML report looked at in a real headless browser (Debian's chromium, installed by
scripts/setup): the page renders the host rows, the screenshot has the asked size and is not
blank, and nothing the outcomes hold runs as script.

The report is built the way a run builds it: incidents of the attempt engine turned into
outcomes (plugins/plugin_utils/incident.py), then the shared report module. With
SENTINEL_UPDATE_DOCS=1 the screenshot is kept as docs/report.png.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import report

REPO = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1280, 1600
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def _command(text, source, verdict="allow", rc=0, out="", err="", become=True):
    return engine.CommandRun(command=text, source=source, verdict=verdict, rc=rc, stdout=out, stderr=err,
                             become=become)


def realistic_report() -> dict:
    """Three hosts as `scripts/demo` leaves them: healed from a runbook and from the model after a
    failed attempt, a plan waiting for approval, and a fault only a human should fix."""
    t = "2026-11-26T06:0{}:{:02d}Z"
    nginx = engine.Incident(host="lab01", service="nginx", state="healed", signature="nginx:bind-98",
                            started=t.format(1, 0), finished=t.format(1, 19))
    nginx.attempts = [
        engine.Attempt(1, source="runbook", diagnosis="nginx is stopped", gate="execute", healthy=False,
                       error_after="port 80 held by another process", started=t.format(1, 0), finished=t.format(1, 6),
                       commands=[_command("service nginx start", "runbook", rc=1,
                                          err="nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address in use)")]),
        engine.Attempt(2, source="llm", diagnosis="a stray python process holds port 80 (pid 4242)", gate="execute",
                       healthy=True, started=t.format(1, 7), finished=t.format(1, 19),
                       llm={"used": True, "calls": 1, "prompt_tokens": 1840, "completion_tokens": 96},
                       commands=[_command("kill 4242", "llm"),
                                 _command("service nginx start", "llm", out="Starting nginx: nginx.")]),
    ]
    redis = engine.Incident(host="lab02", service="redis-server", state="waiting_approval", approval_id="7f3a9c21d0e4",
                            reason="plan 7f3a9c21d0e4 waits for approval: a copy into /etc/redis",
                            started=t.format(2, 0), finished=t.format(2, 4))
    redis.attempts = [engine.Attempt(1, source="llm", gate="approval", started=t.format(2, 0), finished=t.format(2, 4),
                                     diagnosis="redis cannot enter /var/lib/redis (root:root 0700)",
                                     llm={"used": True, "calls": 1, "prompt_tokens": 1620, "completion_tokens": 88},
                                     commands=[_command("cp /etc/redis/redis.conf /etc/redis/redis.conf.bak", "llm",
                                                        verdict="approval", rc=None),
                                               _command("chown redis:redis /var/lib/redis", "llm", rc=None),
                                               _command("service redis-server restart", "llm", rc=None)])]
    binary = engine.Incident(host="lab03", service="nginx", state="escalated", signature="nginx:binary-missing",
                             reason="llm says a human is needed: ESCALATE: the nginx binary is gone",
                             started=t.format(3, 0), finished=t.format(3, 5))
    binary.attempts = [engine.Attempt(1, source="llm", gate="escalate", started=t.format(3, 0), finished=t.format(3, 5),
                                      diagnosis="ESCALATE: /usr/sbin/nginx is missing; reinstalling is a human's call",
                                      refused=[{"command": "apt-get install --reinstall nginx", "source": "llm",
                                                "reasons": ["installs packages: outside the incident's scope"]}],
                                      llm={"used": True, "calls": 1, "prompt_tokens": 1710, "completion_tokens": 61})]
    per_host = {
        "lab01": [engine.outcome(nginx), engine.service_outcome("redis-server", "healthy"),
                  engine.service_outcome("cron", "healthy")],
        "lab02": [engine.outcome(redis), engine.service_outcome("ssh", "healthy")],
        "lab03": [engine.outcome(binary), engine.service_outcome("cron", "healthy")],
    }
    built = report.build_report(per_host, notifications=[
        {"host": "lab03", "service": "nginx", "kind": "refused", "channel": "slack", "status": "sent"},
        {"host": "lab03", "service": "nginx", "kind": "refused", "channel": "pagerduty", "status": "sent"}])
    built["generated"], built["started"], built["finished"] = t.format(3, 6), t.format(1, 0), t.format(3, 6)
    return built


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed (scripts/setup installs Debian's chromium package; "
                    "apt-get install chromium)")
    return found


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of an 8-bit, non-interlaced RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _compression, _filter, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    channels = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    out.write_text(report.render_html(realistic_report()), encoding="utf-8")
    return out


def test_the_page_renders_every_host_row_and_runs_no_script(page, tmp_path):
    hostile = report.build_report({"lab<9>": [{"service": "nginx", "state": "escalated",
                                               "reason": "<script>document.title='pwned'</script>\x1b[31m\x00"}]})
    evil = tmp_path / "evil.html"
    evil.write_text(report.render_html(hostile), encoding="utf-8")
    binary = chromium()
    dom = run_chromium(binary, tmp_path / "profile", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    rows = [line for line in dom.stdout.split("<tr") if 'class="outcome-row"' in line]
    assert len(rows) == 7 and {h for h in ("lab01", "lab02", "lab03") if any(h in r for r in rows)} == {
        "lab01", "lab02", "lab03"}
    assert "kill 4242" in dom.stdout and "98: Address in use" in dom.stdout
    evil_dom = run_chromium(binary, tmp_path / "profile2", "--dump-dom", evil.as_uri())
    assert evil_dom.returncode == 0, evil_dom.stderr[-2000:]
    assert "pwned" not in evil_dom.stdout.split("</title>")[0]  # the title is ours: nothing ran
    assert "&lt;script&gt;" in evil_dom.stdout and "<script>" not in evil_dom.stdout


def test_the_screenshot_has_the_asked_size_and_is_not_blank(page, tmp_path):
    binary = chromium()
    shot = tmp_path / "report.png"
    proc = run_chromium(binary, tmp_path / "profile", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                        page.as_uri())
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    sample = [px for row in rows[::8] for px in row[::37]]
    mean = sum(sample) / len(sample)
    variance = sum((v - mean) ** 2 for v in sample) / len(sample)
    assert variance > 500, f"the screenshot looks blank (variance {variance:.0f})"
    # The header band is dark, the page below it light: the stylesheet was applied.
    assert sum(rows[20][:300]) / 300 < 90 and sum(rows[HEIGHT - 40][:300]) / 300 > 200
    if os.environ.get("SENTINEL_UPDATE_DOCS") == "1":
        shutil.copyfile(shot, REPO / "docs" / "report.png")
