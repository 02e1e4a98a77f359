# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Typed health checks of one service, shared by service_health and execute_plan.

A check answers ``(ok, detail)``; :func:`service_health` runs a service definition's
checks and says whether it is healthy and why not. Runs on targets: standard library
only, Python 3.9 compatible.
"""
from __future__ import annotations

import re
import socket
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

DETAIL_LIMIT = 300
# Debian's LSB init functions decorate messages ("... failed!", "... done.") when not on a tty.
_LSB_SUFFIX = re.compile(r"(\s*\.\.\.\s*(failed!|done\.|ok\.?)?)?\.?\s*$", re.IGNORECASE)
# socket.timeout is TimeoutError from Python 3.10 on, an OSError of its own before.
_TIMEOUTS = (TimeoutError, socket.timeout)
UNIT_STATE_KEYS = ("LoadState", "ActiveState", "SubState", "Result", "UnitFileState")


def parse_show(text: str) -> dict:
    """``systemctl show`` output (``Key=value`` lines) as a dict. A key given on several lines
    (one ``ExecStartPre=`` line per command) keeps every value, joined by a space."""
    props = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            props[key] = (props[key] + " " + value) if props.get(key) and value else (value or props.get(key, ""))
    return props


def show_unit(unit: str, keys, timeout: int) -> tuple:
    """``(props, problem)``: the unit's ``systemctl show`` properties, or why there are none."""
    argv = ["systemctl", "show", "--no-pager", "-p", ",".join(keys), unit]
    rc, out, err = host_probe.run_argv(argv, timeout=timeout)
    props = parse_show(out)
    if rc != 0 or not props:
        return {}, "systemctl show %s: %s (rc %d)" % (unit, host_probe.last_line(err) or "no output", rc)
    return props, ""


def describe_unit_state(unit: str, props: dict) -> str:
    """``nginx.service is failed/failed (result exit-code; unit file enabled)``."""
    load = props.get("LoadState", "")
    if load in ("not-found", "masked", "bad-setting", "error"):
        state = "%s (load state %s)" % (props.get("ActiveState", "?"), load)
    else:
        state = "%s/%s" % (props.get("ActiveState", "?"), props.get("SubState", "?"))
    extra = []
    if props.get("Result") and props["Result"] != "success":
        extra.append("result %s" % props["Result"])
    if props.get("UnitFileState"):
        extra.append("unit file %s" % props["UnitFileState"])
    return "%s is %s%s" % (unit, state, (" (%s)" % "; ".join(extra)) if extra else "")


def _timed_out(rc: int, err: str) -> bool:
    """host_probe.run_argv gave up waiting (rc 124 with its own words), not the program's answer."""
    return rc == 124 and "timed out after" in (err or "")


def _check_service(defn: dict, check: dict) -> tuple:
    init = host_probe.detect_init()
    if init == "systemd":
        notes, ok = [], True
        for unit in defn["units"]:
            props, problem = show_unit(unit, UNIT_STATE_KEYS + ("MainPID",), check["timeout"])
            if problem:
                # show failed (old systemd, bus down): the one-word answer still tells
                rc, out, err = host_probe.run_argv(["systemctl", "is-active", unit], timeout=check["timeout"])
                said = host_probe.last_line(out) or host_probe.last_line(err) or "no output"
                unit_ok, text = rc == 0, "systemctl is-active %s: %s (rc %d)" % (unit, said, rc)
            else:
                unit_ok = props.get("ActiveState") in ("active", "reloading")
                text = describe_unit_state(unit, props)
                # "active" is systemd's bookkeeping: a main process stopped by a signal keeps it
                main = props.get("MainPID", "0")
                frozen = host_probe.frozen_text([int(main)]) if unit_ok and main.isdigit() and main != "0" else ""
                if frozen:
                    unit_ok, text = False, "%s, but its main process is not alive: %s" % (text, frozen)
            ok = ok and unit_ok
            notes.append((unit_ok, text))
        # the failing unit first: the detail is what the error line says
        notes.sort(key=lambda note: note[0])
        return ok, "; ".join(text for _ok, text in notes)
    argv = host_probe.status_argv(defn["name"], init)
    if argv is None:
        return False, "service %s: no init tool found (no systemctl, service or /etc/init.d)" % defn["name"]
    rc, out, err = host_probe.run_argv(argv, timeout=check["timeout"])
    said = host_probe.last_line(out) or host_probe.last_line(err) or "no output"
    said = _LSB_SUFFIX.sub("", said) or said  # "nginx is not running ... failed!" -> the words that matter
    text = "%s: %s (rc %d)" % (" ".join(argv), said, rc)
    if rc == 0:
        # an init script's "running" means a PID exists; a stopped or zombie daemon has one
        frozen = host_probe.frozen_text(host_probe.named_pids(defn["processes"] or [defn["name"]]))
        if frozen:
            return False, "%s, but its processes are not alive: %s" % (text, frozen)
    return rc == 0, text, _timed_out(rc, err)


def _check_process(defn: dict, check: dict) -> tuple:
    pattern = check["pattern"] or re.escape(defn["name"])
    shown = check["pattern"] or defn["name"]
    found = host_probe.find_processes(pattern)
    if not found:
        return False, "no process matches %r" % shown
    stopped = [p for p in found if (host_probe.read_stat(p["pid"]) or {}).get("state") in ("T", "t")]
    pid_list = ", ".join(str(p["pid"]) for p in found[:5]) + (", ..." if len(found) > 5 else "")
    if stopped and len(stopped) == len(found):
        # a process stopped by SIGSTOP exists but serves nothing
        return False, "%d process(es) match %r but all are stopped (pid %s)" % (len(found), shown, pid_list)
    return True, "%d process(es) match %r (pid %s)" % (len(found), shown, pid_list)


def _unique(infos: list) -> list:
    seen = set()
    return [i for i in infos if not (i["pid"] in seen or seen.add(i["pid"]))]


def _check_port(defn: dict, check: dict) -> tuple:
    port, wanted = check["port"], check["process"]
    socks = host_probe.listeners([port])
    if not socks:
        return False, "port %d is not listening" % port
    holders = _unique([h for s in socks for h in s["holders"]])
    where = ", ".join(host_probe.format_address(s["address"], s["port"]) for s in socks)
    if not wanted:
        frozen = host_probe.frozen_text([h["pid"] for h in holders])
        if frozen:
            return False, "port %d is listening on %s, but its holder is not alive: %s" % (port, where, frozen)
        by = (" by " + host_probe.describe_holders(holders)) if holders else ""
        return True, "port %d is listening on %s%s" % (port, where, by)
    if not holders:
        # Not visible (another user's process without CAP_SYS_PTRACE): judge by the socket's owner.
        owners = [s["uid"] for s in socks]
        candidates = _unique([p for s in socks for p in host_probe.likely_holders(s)])
        matching = [p for p in candidates if wanted in host_probe.process_names(p)]
        user = host_probe.user_name(owners[0])
        if matching:
            return True, ("port %d is listening as user %s, who runs %s (the holding fd is not visible)"
                          % (port, user, host_probe.describe_holders(matching)))
        return False, ("port %d is listening as user %s, who runs no process named %s"
                       " (the holding fd is not visible; run with become)" % (port, user, wanted))
    matching = [h for h in holders if wanted in host_probe.process_names(h)]
    if matching:
        frozen = host_probe.frozen_text([h["pid"] for h in matching])
        if frozen:
            # the kernel still accepts connections into the backlog of a stopped daemon's socket
            return False, ("port %d is held by %s, which is not alive: %s"
                           % (port, host_probe.describe_holders(matching), frozen))
        return True, "port %d is held by %s" % (port, host_probe.describe_holders(matching))
    return False, "port %d is held by %s, not %s" % (port, host_probe.describe_holders(holders), wanted)


def _check_http(defn: dict, check: dict) -> tuple:
    # urllib (with http.client, email and ssl) is imported only by a call that has an http
    # check: it is the largest import of a health check, and most services have none.
    import urllib.request as urllib_request  # pylint: disable=import-outside-toplevel
    from urllib.error import HTTPError, URLError  # pylint: disable=import-outside-toplevel

    class _NoRedirect(urllib_request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    url, expected = check["url"], check["status"]
    opener = urllib_request.build_opener(urllib_request.ProxyHandler({}), _NoRedirect())
    try:
        response = opener.open(url, timeout=check["timeout"])
        status = response.getcode()
        response.close()
    except HTTPError as exc:
        status = exc.code
    except URLError as exc:
        reason = getattr(exc, "reason", exc)
        return False, "GET %s failed: %s" % (url, reason), isinstance(reason, _TIMEOUTS)
    except Exception as exc:  # socket.timeout, ConnectionResetError, http.client errors
        return False, "GET %s failed: %s" % (url, str(exc) or type(exc).__name__), isinstance(exc, _TIMEOUTS)
    if status == expected:
        return True, "GET %s returned %d" % (url, status)
    return False, "GET %s returned %d, expected %d" % (url, status, expected)


def _check_command(defn: dict, check: dict) -> tuple:
    argv, indicator, expected = check["argv"], check["indicator"], check["rc"]
    rc, out, err = host_probe.run_argv(argv, timeout=check["timeout"])
    shown = " ".join(argv)
    if len(shown) > 100:  # an inline script: its program and first word say which check it is
        shown = "%s ... (%d arguments)" % (" ".join(argv[:2])[:80], len(argv))
    if rc != expected:
        said = host_probe.last_line(err) or host_probe.last_line(out) or "no output"
        return False, "%s exited %d, expected %d: %s" % (shown, rc, expected, said), _timed_out(rc, err)
    if indicator and indicator not in out:
        return False, "%s output lacks %r: %s" % (shown, indicator, host_probe.last_line(out) or "no output")
    return True, "%s exited %d%s" % (shown, rc, (" with %r in its output" % indicator) if indicator else "")


CHECKS = {
    "service": _check_service,
    "process": _check_process,
    "port": _check_port,
    "http": _check_http,
    "command": _check_command,
}


def run_checks(defn: dict, default_timeout: int) -> list:
    """Run every check of a resolved definition (service_spec.resolve); each result is
    ``{"type", "ok", "detail"}`` with a redacted, bounded detail. All checks run, even
    after one fails, so the record shows the whole picture."""
    results = []
    for check in defn["checks"]:
        check = dict(check)
        if not check.get("timeout"):
            check["timeout"] = default_timeout
        answer = CHECKS[check["type"]](defn, check)
        ok, detail = answer[0], redact_text(answer[1])
        if len(detail) > DETAIL_LIMIT:
            detail = detail[:DETAIL_LIMIT - 3] + "..."
        results.append({"type": check["type"], "ok": bool(ok), "detail": detail})
        if not ok and len(answer) > 2 and answer[2]:
            results[-1]["timed_out"] = True  # no answer within its timeout: slow, or frozen
    return results


def service_health(defn: dict, default_timeout: int) -> dict:
    """``{"healthy", "error", "checks"}`` of one resolved service definition."""
    results = run_checks(defn, default_timeout)
    failing = [r for r in results if not r["ok"]]
    out = {"healthy": not failing, "error": failing[0]["detail"] if failing else "", "checks": results}
    if failing and all(r.get("timed_out") for r in failing):
        out["timed_out"] = True  # every failing check went unanswered; none said "down"
    return out


def processes_stopped(defn: dict) -> bool:
    """Every process of the service is stopped (SIGSTOP, state T): frozen, not slow. False
    when none runs (that is "down", which the checks say)."""
    names = set(defn.get("processes") or [defn["name"]])
    skip = host_probe.own_lineage()
    found = [p for p in host_probe.processes() if p["pid"] not in skip and names & host_probe.process_names(p)]
    if not found:
        return False
    return all((host_probe.read_stat(p["pid"]) or {}).get("state") in ("T", "t") for p in found)


def settle_health(defn: dict, default_timeout: int, settle: float, interval: float = 1.0,
                  first: float = 0.2) -> dict:
    """:func:`service_health`, asked again for up to ``settle`` seconds until healthy: a
    service just started may need a moment to open its port. The waits double from
    ``first`` up to ``interval`` seconds, so a service that is up within a fraction of a
    second is seen then, and a slow one is not checked more than once per ``interval``.
    Adds ``rounds`` (how many times the checks ran) and ``seconds`` (time spent)."""
    started = time.monotonic()
    deadline = started + max(0.0, settle)
    rounds = 0
    wait = min(first, interval)
    while True:
        rounds += 1
        result = service_health(defn, default_timeout)
        if result["healthy"] or time.monotonic() + wait > deadline:
            break
        time.sleep(wait)
        wait = min(wait * 2, interval)
    result["rounds"] = rounds
    result["seconds"] = round(time.monotonic() - started, 3)
    return result
