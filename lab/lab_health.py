"""The lab's own health check, run inside a lab container by its python3 (stdlib only).

Independent of the collection on purpose: it is the referee the product is judged by, so
it shares no code with the collection's modules and asks the host in its own ways.
`lab/sentinel_lab.py` pipes this file to `python3 - SERVICE...` in a container; it prints
one JSON object: {service: {"healthy": bool, "checks": [{"name", "ok", "detail"}]}}.
"""
from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

SYSTEMD = os.path.isdir("/run/systemd/system")
LAB_CA = "/etc/sentinel/lab-ca.crt"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# A status script or a client that has not answered in this long is read as a failed check. Not
# less: on a 2-core machine running the suite's lab files side by side, `service postgresql
# status` (a shell script and pg_lsclusters) once took more than 4 s on a healthy host. Checks
# that must see a hung server quickly (a greeting, an HTTP answer, redis-cli) set their own.
RUN_TIMEOUT = 8


def run(argv: list[str], timeout: float = RUN_TIMEOUT) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {timeout:g} s"
    except OSError as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def check(name: str, ok: bool, detail: str) -> dict:
    return {"name": name, "ok": bool(ok), "detail": " ".join(detail.split())[:300]}


def parse_listeners(ss_output: str) -> list[tuple[str, list[tuple[str, int]]]]:
    """Rows of `ss -ltnpH`: (local address, [(process name, pid), ...])."""
    rows = []
    for line in ss_output.splitlines():
        if "LISTEN" not in line:
            continue
        fields = line.split()
        procs = [(name, int(pid)) for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line)]
        rows.append((fields[3] if len(fields) > 3 else "?", procs))
    return rows


def listeners(port: int) -> list[tuple[str, list[tuple[str, int]]]]:
    _rc, out = run(["ss", "-ltnpH", f"sport = :{port}"])
    return parse_listeners(out)


def describe(rows: list[tuple[str, list[tuple[str, int]]]]) -> str:
    if not rows:
        return "nothing listens"
    return "; ".join(
        "%s by %s" % (addr, ",".join(sorted({n for n, _pid in procs})) or "an unknown process") for addr, procs in rows
    )


def port_owned(port: int, names: set[str]) -> dict:
    """Every listener on the port is one of `names` (and there is one)."""
    rows = listeners(port)
    owned = bool(rows) and all(procs and all(n in names for n, _pid in procs) for _addr, procs in rows)
    return check("port", owned, f":{port} " + describe(rows))


def http(name: str, url: str, context: ssl.SSLContext | None = None, timeout: float = 3) -> dict:
    try:
        if context is not None:
            response = urllib.request.urlopen(url, timeout=timeout, context=context)  # noqa: S310 (loopback)
        else:
            response = NO_PROXY.open(url, timeout=timeout)
        status, body = response.status, response.read(300).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read(300).decode("utf-8", "replace")
    except Exception as exc:  # refused, timed out, TLS verification failed: all are the answer
        reason = getattr(exc, "reason", None) or exc
        return check(name, False, f"GET {url} failed: {reason}")
    detail = f"GET {url} -> {status}" + ("" if status == 200 else f": {body.strip()}")
    return check(name, status == 200, detail)


def init_status(unit: str, script: str) -> dict:
    """What the init system says: `systemctl is-active UNIT`, or `service SCRIPT status`."""
    if SYSTEMD:
        rc, out = run(["systemctl", "is-active", unit])
        return check("service", rc == 0 and out == "active", f"{unit} is {out or 'unknown'}")
    rc, out = run(["service", script, "status"])
    return check("service", rc == 0, "exit %d: %s" % (rc, out or "(no output)"))


def processes(comm: str) -> list[tuple[int, str]]:
    """(pid, state letter) of the processes whose kernel name is `comm`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        if name == comm:
            found.append((int(entry), stat[stat.rindex(")") + 2]))
    return found


def alive(comm: str, pids: set[int] | None = None) -> dict:
    """A process named `comm` (of `pids`, when given) that can run: not stopped (T, t), not a
    zombie (Z), not dead (X). A daemon stopped by a signal keeps its PID, its pid file and its
    listening socket, so a name or a listener alone says nothing about whether it serves."""
    procs = [(pid, state) for pid, state in processes(comm) if pids is None or pid in pids]
    live = [pid for pid, state in procs if state not in "ZTtXx"]
    detail = ", ".join(f"{pid} ({state})" for pid, state in procs) or f"no {comm} process"
    return check("alive", bool(live), f"{comm}: {detail}")


def banner(port: int, prefix: bytes, timeout: float = 3) -> dict:
    """The server on the port greets a new connection with `prefix` within `timeout`: a hung
    daemon keeps its socket (the kernel still completes the handshake) but says nothing."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            said = conn.recv(64)
    except OSError as exc:
        return check("banner", False, f":{port} no greeting: {exc}")
    return check("banner", said.startswith(prefix), f":{port} said {said[:40]!r}")


def nginx() -> list[dict]:
    tls = ssl.create_default_context(cafile=LAB_CA)
    return [
        init_status("nginx.service", "nginx"),
        port_owned(80, {"nginx"}),
        http("http", "http://127.0.0.1/"),
        http("https", "https://127.0.0.1/", context=tls),
    ]


def redis() -> list[dict]:
    rc, out = run(["redis-cli", "ping"], timeout=3)
    checks = [check("ping", out == "PONG", out or "exit %d" % rc)]
    rc, out = run(["redis-cli", "set", "sentinel:probe", "1"], timeout=3)
    checks.append(check("write", out == "OK", out or "exit %d" % rc))
    return checks


def cron() -> list[dict]:
    rc, out = run(["pgrep", "-x", "cron"])
    return [check("process", rc == 0, "cron pid " + out.replace("\n", ",") if rc == 0 else "no cron process"),
            alive("cron")]


def ssh() -> list[dict]:
    rows = listeners(22)
    holders = {pid for _addr, procs in rows for n, pid in procs if n == "sshd"}
    return [check("port", bool(holders), ":22 " + describe(rows)), alive("sshd", holders), banner(22, b"SSH-")]


def postgres() -> list[dict]:
    rc, out = run(["runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-h", "/var/run/postgresql", "-p", "5432",
                   "-d", "sentinelapp", "-tAc", "SELECT 1"])
    return [
        init_status("postgresql@15-main.service", "postgresql"),
        port_owned(5432, {"postgres"}),
        check("query", rc == 0 and out == "1", "SELECT 1 on sentinelapp -> " + (out or "exit %d" % rc)),
    ]


def app() -> list[dict]:
    procs = processes("sentinel-app")
    live = [pid for pid, state in procs if state not in "ZTtX"]
    detail = ", ".join(f"{pid} ({state})" for pid, state in procs) or "no sentinel-app process"
    return [
        init_status("sentinel-app.service", "sentinel-app"),
        check("process", bool(live), detail),
        port_owned(8080, {"sentinel-app"}),
        http("health", "http://127.0.0.1:8080/health", timeout=6),
    ]


def journald() -> list[dict]:
    """journald runs and a message sent to it reaches the persistent journal (not only the
    volatile one in /run, where journald keeps messages it cannot write to disk)."""
    token = f"sentinel-lab-probe-{os.getpid()}-{time.time():.0f}"
    checks = [init_status("systemd-journald.service", "systemd-journald")]
    run(["logger", "-t", "sentinel-lab-probe", token])
    found, out = False, ""
    for _attempt in range(15):
        _rc, out = run(["journalctl", "--no-pager", "-q", "-D", "/var/log/journal", "-o", "cat",
                        "-t", "sentinel-lab-probe", "-n", "20"])
        if token in out:
            found = True
            break
        time.sleep(0.2)
    tail = out.splitlines()[-1] if out else "nothing"
    checks.append(check("journal", found, "probe reached /var/log/journal" if found else f"probe not in /var/log/journal; last there: {tail}"))
    return checks


CHECKS = {"nginx": nginx, "redis": redis, "cron": cron, "ssh": ssh, "postgres": postgres, "app": app,
          "journald": journald}


def main(names: list[str]) -> int:
    result = {}
    for name in names or list(CHECKS):
        checks = CHECKS[name]()
        result[name] = {"healthy": all(c["ok"] for c in checks), "checks": checks}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
