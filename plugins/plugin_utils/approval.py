# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Approval records: one per waiting plan, authenticated by the controller, used at most once.

A plan the policy gates is written as one record, the pending file
``<artifacts>/pending/<id>.json``. The approver is shown that file and the approval runs
that file: nothing of the plan is read from the fact cache. The record carries:

- what runs: each command as the policy judged it (argv, ``become``, verdict, effects);
- the incident it was made for: the inventory host and its real target (connection,
  address, port), the service, the failure signature and error, and when the evidence
  was taken;
- ``mac``: HMAC-SHA256 over the canonical JSON of everything else, with a key only the
  controller holds (``controller_key``). A writer of the pending directory or of the fact
  cache who lacks the key cannot change a record, nor make one, without the MAC failing.

Ids are random (64 bits), so an id names one incident's plan and never the next one.

Use is claimed before anything runs, by creating ``<state>/used/<id>`` with ``O_EXCL``
in the controller's private state directory: of any number of concurrent approvals (or
replays of a copied record) exactly one creates it; every other one is refused, and the
marker says who used it and when.

Why an HMAC rather than signatures: the only party that writes records and the only one
that checks them is the controller (the same user on the same machine, or controllers
given the same secret). A signature would add a public key nobody else needs, and a
private key that must be kept exactly as secret as the HMAC key.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import COMMAND_SECTIONS

FORMAT = "sentinel-approval/1"
KEY_ENV = "SENTINEL_APPROVAL_KEY"     # the key itself, hex (controllers that share approvals: AWX)
DIR_ENV = "SENTINEL_APPROVAL_DIR"     # the controller's private approval state (key file, used ids)
KEY_BYTES = 32
ID_RE = re.compile(r"^[A-Za-z0-9_-]{4,64}$")


class ApprovalRefused(Exception):
    """The record cannot be used; the message says why in an operator's words."""


def state_dir(configured: str | None = None) -> str:
    """The controller's private approval state: ``$SENTINEL_APPROVAL_DIR``, else
    ``$XDG_CACHE_HOME/sentinel-remediation/approval`` (``~/.cache/...``)."""
    chosen = configured or os.environ.get(DIR_ENV)
    if chosen:
        return chosen
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "sentinel-remediation", "approval")


def _private_dir(directory: str) -> None:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ApprovalRefused(f"the approval state directory {directory} must belong to this user "
                              f"(uid {os.geteuid()}) with mode 0700 (it has uid {info.st_uid}, "
                              f"mode {oct(info.st_mode & 0o777)})")


def controller_key(directory: str | None = None, environ: Mapping[str, str] | None = None) -> bytes:
    """The controller's approval key: ``$SENTINEL_APPROVAL_KEY`` (hex, at least 32 bytes) when
    set, else ``<state>/approval.key``, created on first use from ``os.urandom`` with mode
    0600 and refused when anyone but this user could read or replace it."""
    env = os.environ if environ is None else environ
    given = env.get(KEY_ENV)
    if given:
        try:
            key = bytes.fromhex(given.strip())
        except ValueError:
            raise ApprovalRefused(f"{KEY_ENV} is not hexadecimal") from None
        if len(key) < KEY_BYTES:
            raise ApprovalRefused(f"{KEY_ENV} holds {len(key)} bytes; at least {KEY_BYTES} are needed "
                                  "(python3 -c 'import secrets; print(secrets.token_hex(32))')")
        return key
    directory = state_dir(directory)
    _private_dir(directory)
    path = os.path.join(directory, "approval.key")
    if not os.path.exists(path):
        # Written whole under a temporary name, then linked into place: a concurrent first
        # use either wins the link or reads the winner's complete key.
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_hex(KEY_BYTES).encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    info = os.stat(path)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ApprovalRefused(f"the approval key {path} must belong to this user with mode 0600 "
                              f"(it has uid {info.st_uid}, mode {oct(info.st_mode & 0o777)})")
    with open(path, encoding="ascii") as handle:
        try:
            key = bytes.fromhex(handle.read().strip())
        except ValueError:
            key = b""
    if len(key) < KEY_BYTES:
        raise ApprovalRefused(f"the approval key {path} is damaged (remove it: pending plans then need a new run)")
    return key


def new_id() -> str:
    """A fresh approval id: random, so an old approve command never names a new incident."""
    return secrets.token_hex(8)


def canonical(record: Mapping[str, Any]) -> bytes:
    """The bytes the MAC covers: every field but ``mac``, as sorted compact ASCII JSON."""
    body = {k: v for k, v in record.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode("ascii")


def _mac(key: bytes, record: Mapping[str, Any]) -> str:
    return hmac.new(key, canonical(record), hashlib.sha256).hexdigest()


def seal(record: Mapping[str, Any], key: bytes) -> dict:
    """The record with its format and MAC, through a JSON round trip (what is sealed is what
    a reader will parse)."""
    body = json.loads(json.dumps({k: v for k, v in record.items() if k != "mac"}, default=str))
    body["format"] = FORMAT
    return dict(body, mac=_mac(key, body))


def dumps(sealed: Mapping[str, Any]) -> bytes:
    """The pending file's bytes (indented for people; the MAC is over the canonical form)."""
    return (json.dumps(sealed, indent=2, sort_keys=True) + "\n").encode("utf-8")


def digest(raw: bytes) -> str:
    """What an approver was shown, as a short fingerprint of the pending file's bytes."""
    return hashlib.sha256(raw).hexdigest()


def parse(raw: bytes, key: bytes, approval_id: str) -> dict:
    """The pending file's record once its MAC and id are checked, else ``ApprovalRefused``."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApprovalRefused(f"plan {approval_id}: the pending file is not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ApprovalRefused(f"plan {approval_id}: the pending file is not a JSON object")
    if record.get("format") != FORMAT or not isinstance(record.get("mac"), str):
        raise ApprovalRefused(f"plan {approval_id}: the pending file carries no controller MAC "
                              f"(format {record.get('format')!r}, expected {FORMAT}): written by hand, "
                              "or by a version without authenticated approvals; a new run plans again")
    if not hmac.compare_digest(record["mac"], _mac(key, record)):
        raise ApprovalRefused(f"plan {approval_id}: the pending file was changed after the controller wrote it "
                              "(or written with another key): its MAC does not match; nothing of it runs. "
                              f"Runs that plan and approve in different containers or on different machines "
                              f"(AWX jobs, execution environments) must share the key: {KEY_ENV}, or one {DIR_ENV}")
    if record.get("id") != approval_id:
        raise ApprovalRefused(f"plan {approval_id}: the pending file holds plan {record.get('id')!r}, "
                              "authentic but not the one named")
    if raw != dumps(record):
        # The MAC covers what the JSON parser keeps; a reader of the file may see more: an earlier
        # duplicate key (the parser keeps the last one), text after the object, escapes that
        # render otherwise. Only the controller's own rendering is what an approver was shown.
        raise ApprovalRefused(f"plan {approval_id}: the pending file's bytes are not the controller's rendering of "
                              "its record (a duplicate key, added text or reformatting): it was edited after it "
                              "was written, and a reader may have seen other commands than those that would run; "
                              "nothing of it runs")
    return record


def binding_problem(record: Mapping[str, Any], host: str, target: str) -> str:
    """Why this record may not run on ``host`` (at ``target``), or ``""``."""
    if record.get("host") != host or record.get("target") != target:
        return (f"plan {record.get('id')} was made for {record.get('host')} ({record.get('target')}), "
                f"not for {host} ({target})")
    return ""


def incident_change(record: Mapping[str, Any], signature: str, error: str,
                    settled: Callable[[Sequence[str]], str] | None = None, unfinished: Sequence[str] = ()) -> str:
    """Why the host's current failure is not the incident the plan was made for, or ``""``.

    A command of the evidence killed at its timeout in one of the two looks (a loaded host: a
    status or config test that did not finish) says nothing of the failure, so the looks are
    compared without every command section that did not finish in either (``settled``: this
    look's signature without the sections given, ``signature.settled_signature``; ``unfinished``:
    its sections that did not finish; the record keeps the plan's). Two finished looks that
    differ still differ."""
    left_out = [key for key in COMMAND_SECTIONS
                if key in set(unfinished) | set(record.get("unfinished") or ())]
    if record.get("signature") != signature and left_out and settled is not None:
        kept = (record.get("settled") or {}).get(",".join(left_out))
        if kept and kept == settled(left_out):
            return ""
    if record.get("signature") != signature:
        return (f"the failure changed since plan {record.get('id')} was made (then {record.get('signature')}: "
                f"{record.get('error')}; now {signature}: {error}): nothing ran; the next run plans for it")
    return ""


def _moment(stamp: Any) -> float | None:
    try:
        when = datetime.datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def expiry_problem(record: Mapping[str, Any], now: float, max_age: int) -> str:
    """Why the record is too old to approve (``max_age`` seconds after it was requested; 0:
    never), or ``""``. A record without a readable time is too old: nothing says when the
    approver's view of the host was taken."""
    if max_age <= 0:
        return ""
    requested = _moment(record.get("requested"))
    if requested is None:
        return f"it carries no request time ({record.get('requested')!r}), so its age is unknown"
    age = int(now - requested)
    if age <= max_age:
        return ""
    return (f"it was recorded at {record.get('requested')}, {age} s ago, and an approval holds for "
            f"{max_age} s (remediate_approval_max_age): the host may not be what the approver saw; "
            "the next run plans again")


def policy_change(record: Mapping[str, Any], verdicts: Sequence[Mapping[str, Any]]) -> str:
    """Why today's policy, in the scope of the host's current evidence, does not judge the
    recorded commands as they were approved, or ``""``."""
    refused = [v for v in verdicts if v.get("verdict") == "reject"]
    if refused:
        return "the policy now rejects: " + "; ".join(str(v.get("command")) for v in refused)
    stored = [[c.get("argv"), bool(c.get("become"))] for c in record.get("commands") or []]
    if [[v.get("argv"), bool(v.get("become"))] for v in verdicts] != stored:
        return "the policy now turns the approved commands into other argv or privileges; nothing ran"
    return ""


def used_note(directory: str | None, approval_id: str) -> str:
    """``"plan <id> was already used (by ..., run ..., at ...)"`` when it was, else ``""``."""
    path = os.path.join(state_dir(directory), "used", approval_id)
    try:
        with open(path, encoding="utf-8") as handle:
            who = json.load(handle)
    except FileNotFoundError:
        return ""
    except (OSError, ValueError):
        who = {}
    who = who if isinstance(who, dict) else {}
    return (f"plan {approval_id} was already used (by {who.get('by', '?')} in run {who.get('run', '?')} "
            f"at {who.get('at', '?')}); nothing ran again")


def claim(directory: str | None, approval_id: str, by: str, run: str) -> None:
    """Mark ``approval_id`` used, once: ``ApprovalRefused`` when it already was (by whom, when)."""
    used = os.path.join(state_dir(directory), "used")
    _private_dir(state_dir(directory))
    os.makedirs(used, mode=0o700, exist_ok=True)
    path = os.path.join(used, approval_id)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Written whole under a name of its own, then linked into place (fails if the mark exists): a
    # loser never reads a mark the winner has created and not yet written (who used it, and when).
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.write(fd, json.dumps({"by": by, "run": run, "at": stamp}).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    except FileExistsError:
        raise ApprovalRefused(used_note(directory, approval_id) or f"plan {approval_id} was already used") from None
    finally:
        os.unlink(tmp)


def write_pending(directory: str, sealed: Mapping[str, Any]) -> str:
    """Write the pending file for a sealed record, never over another one; returns its path."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, f"{sealed['id']}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    data = dumps(sealed)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)   # fails if the id exists: a record is never replaced
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    return path


def read_pending(directory: str, approval_id: str) -> bytes:
    path = os.path.join(directory, f"{approval_id}.json")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise ApprovalRefused(f"plan {approval_id} has no pending file in {directory}: it was used, "
                              "rejected or withdrawn, or never made here") from None
    except OSError as exc:
        raise ApprovalRefused(f"plan {approval_id}: cannot read its pending file: {exc}") from None


def withdraw(directory: str, approval_id: str, why: str) -> None:
    """Retire a plan whose incident ended before it was approved, keeping why beside it."""
    retire(directory, approval_id, "withdrawn")
    try:
        note = os.path.join(directory, "withdrawn", f"{approval_id}.why")
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, why.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:
        pass   # the plan is withdrawn all the same; only the note of why is missing


def withdrawn_note(directory: str, approval_id: str) -> str:
    """``"plan <id> was withdrawn before it was approved: <why>"`` when it was, else ``""``."""
    aside = os.path.join(directory, "withdrawn")
    if not os.path.exists(os.path.join(aside, f"{approval_id}.json")):
        return ""
    try:
        with open(os.path.join(aside, f"{approval_id}.why"), encoding="utf-8") as handle:
            why = handle.read(500).strip()
    except OSError:
        why = ""
    return (f"plan {approval_id} was withdrawn before it was approved: {why or 'its incident ended'}; "
            "nothing ran (a plan waits only while its incident lasts: the next failure gets a plan of its own)")


def retire(directory: str, approval_id: str, why: str) -> None:
    """Move a used or refused pending file aside (``<pending>/<why>/<id>.json``): kept for the
    record, no longer listed or approvable."""
    path = os.path.join(directory, f"{approval_id}.json")
    aside = os.path.join(directory, why)
    try:
        os.makedirs(aside, mode=0o700, exist_ok=True)
        os.replace(path, os.path.join(aside, f"{approval_id}.json"))
    except FileNotFoundError:
        pass
    except OSError:
        try:
            os.remove(path)
        except OSError:
            pass
