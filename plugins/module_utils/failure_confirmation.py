# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Confirmed failures only: a failing service is checked again before anything acts on it.

A check that fails once may be a blip: a checkpoint, an I/O stall, a service paused for a
moment. As Kubernetes probes (``failureThreshold``), Nagios' soft states
(``max_check_attempts``) and Monit's "failed for N cycles" do, a failure counts only when it
is seen again: each failing service is re-checked ``confirm_attempts`` times,
``confirm_interval`` seconds apart (per service, from its definition, else the call's), and
no re-check starts after ``max_seconds`` from the first (the round trip stays bounded).
A service that passes a re-check recovered by itself: nothing acts on it; a failing service
that depends on it is then checked once more (a paused database fails its app too).

A failure whose every failing check went unanswered within its timeout, while the service's
processes run, is ``degraded`` (slow, alive), not down: restarting it drops what it is busy
with. Processes that are all stopped (SIGSTOP) are frozen, which is down. Runs on targets:
standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import time


def _setting(defn: dict, params: dict, key: str) -> int:
    value = defn.get(key)
    return int(params[key] if value is None else value)


def confirm(definitions: list, results: list, recheck, params: dict, clock=time.monotonic, sleep=time.sleep) -> None:
    """Re-check the failing services of ``results`` (aligned with ``definitions``) in place.

    ``recheck(defn)`` answers as ``health_checks.service_health``. Each failing result due a
    re-check gets ``confirmation``: ``{"checks", "seconds", "first_error", "recovered"}``; one that passed a
    re-check becomes the passing result (``healthy`` true) with that record."""
    started = clock()
    deadline = started + max(0, int(params["confirm_max_seconds"]))
    due = {}  # index -> (next check time, re-checks left, interval)
    for index, (defn, result) in enumerate(zip(definitions, results)):
        if result["healthy"]:
            continue
        left = _setting(defn, params, "confirm_attempts")
        if left > 0:
            result["confirmation"] = {"checks": 1, "seconds": 0.0, "first_error": result["error"], "recovered": False}
            interval = max(0, _setting(defn, params, "confirm_interval"))
            due[index] = (started + interval, left, interval)
    while due:
        index = min(due, key=lambda i: due[i][0])
        when, left, interval = due.pop(index)
        if when > deadline:
            continue  # past the bound: the failure stands as seen
        now = clock()
        if when > now:
            sleep(when - now)
        record = results[index]["confirmation"]
        again = recheck(definitions[index])
        record["checks"] += 1
        record["seconds"] = round(clock() - started, 3)
        if again["healthy"]:
            record["recovered"] = True
            kept = {k: v for k, v in results[index].items() if k in ("name", "confirmation")}
            results[index].clear()
            results[index].update(again, **kept)
            # A service that still fails and needs this one is looked at once more, now: its
            # failure was likely this one's.
            name = definitions[index]["name"]
            for other, defn in enumerate(definitions):
                if other not in due and not results[other]["healthy"] and "confirmation" in results[other] \
                        and name in (defn.get("depends_on") or ()):
                    due[other] = (clock(), 1, 0)
            continue
        # The latest look is the one acted on.
        kept = {k: v for k, v in results[index].items() if k in ("name", "confirmation")}
        results[index].clear()
        results[index].update(again, **kept)
        if left > 1:
            due[index] = (clock() + interval, left - 1, interval)


def classify_timeouts(definitions: list, results: list, stopped) -> None:
    """Mark a still-failing service whose failing checks all timed out: ``frozen`` when
    ``stopped(defn)`` (all its processes stopped), else ``degraded`` unless its definition's
    ``on_timeout`` is ``remediate``."""
    for defn, result in zip(definitions, results):
        if result["healthy"] or not result.get("timed_out"):
            continue
        if stopped(defn):
            result["frozen"] = True
        elif (defn.get("on_timeout") or "escalate") != "remediate":
            result["degraded"] = True
