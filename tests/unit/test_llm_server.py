# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/llm_server.py's relay, record and replay modes, driven by the real openai client."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai
import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import (
    LLMClient,
    LLMError,
    resolve_settings,
)
from llm_server import LLMServer, exchange_keys, plan_content

SERVER = Path(__file__).resolve().parents[1] / "llm_server.py"
FORMAT = {"type": "json_schema", "json_schema": {"name": "remediation_plan", "schema": {"type": "object"}}}


def user_message(pid: int, when: str, detail: str = "bind() to 0.0.0.0:80 failed (98: Address already in use)") -> str:
    return (f"Service: nginx\nFailure: nginx is not running; {detail}\n"
            f"Evidence:\n<<<EVIDENCE-{pid:08x}\n{when} nginx[{pid}]: {detail}\n"
            f"port 80 held by python3 (pid {pid + 7}, started {when})\nEVIDENCE-{pid:08x}>>>")


def messages(pid: int = 4242, when: str = "2025-03-01T10:00:00Z", **kw) -> list[dict]:
    return [{"role": "system", "content": "You plan the repair of one broken service."},
            {"role": "user", "content": user_message(pid, when, **kw)}]


def ask(server: LLMServer, msgs: list[dict], timeout: float = 20.0) -> str | None:
    client = openai.OpenAI(base_url=server.url, api_key="test-key", max_retries=0, timeout=timeout)
    try:
        response = client.chat.completions.create(model="relay-model", messages=msgs, response_format=FORMAT)
    finally:
        client.close()
    return response.choices[0].message.content


def wait_for(path: Path, seconds: float = 10.0) -> Path:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path


def put(path: Path, text: str) -> None:
    """Write whole, then rename into place, as the docs tell people to."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class Asking(threading.Thread):
    """One client request in the background (a relay answer is written meanwhile)."""

    def __init__(self, server: LLMServer, msgs: list[dict], timeout: float = 20.0):
        super().__init__(daemon=True)
        self.server, self.msgs, self.timeout = server, msgs, timeout
        self.answer: str | None = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.answer = ask(self.server, self.msgs, self.timeout)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            self.error = exc

    def result(self) -> str | None:
        self.join(30)
        if self.error:
            raise self.error
        return self.answer


# ---------------------------------------------------------------- relay


def test_relay_a_person_answers_through_files_and_it_is_recorded(tmp_path):
    relay, record = tmp_path / "relay", tmp_path / "transcripts" / "by-hand"
    with LLMServer(relay_dir=relay, relay_poll=0.05, record_dir=record, log=None) as server:
        first = Asking(server, messages())
        first.start()
        request = json.loads(wait_for(relay / "0001.request.json").read_text())
        assert request["n"] == 1 and request["model"] == "relay-model"
        assert request["messages"] == messages()
        assert request["response_format"] == FORMAT
        assert str(relay / "0001.answer.json") in request["answer_files"]
        readable = (relay / "0001.request.md").read_text()
        assert "## USER" in readable and "Service: nginx" in readable and "0001.answer.json" in readable
        plan = {"diagnosis": "python3 holds port 80", "commands": ["kill 4249", "service nginx start"],
                "rationale": "free the port, then start"}
        put(relay / "0001.answer.json", json.dumps(plan))
        assert json.loads(first.result()) == plan

        second = Asking(server, messages(pid=777))
        second.start()
        wait_for(relay / "0002.request.json")
        put(relay / "0002.answer.txt", "ESCALATE: only a human can tell which process should own port 80\n")
        assert second.result() == "ESCALATE: only a human can tell which process should own port 80"

    transcripts = sorted(record.glob("*.json"))
    assert [p.name for p in transcripts] == ["001.json", "002.json"]
    saved = json.loads(transcripts[0].read_text())
    assert saved["source"] == "relay"
    assert saved["request"]["messages"] == messages()
    assert json.loads(saved["answer"]["content"]) == plan
    assert (saved["service"], saved["turn"]) == ("nginx", 1)
    assert saved["key"] == exchange_keys(messages())["key"]


def test_relay_reply_dict_and_a_half_written_answer(tmp_path):
    with LLMServer(relay_dir=tmp_path, relay_poll=0.05, log=None) as server:
        asking = Asking(server, messages())
        asking.start()
        wait_for(tmp_path / "0001.request.json")
        (tmp_path / "0001.answer.json").write_text('{"content": "half')   # not JSON yet: the server keeps polling
        time.sleep(0.4)
        assert asking.is_alive()
        put(tmp_path / "0001.answer.json", json.dumps({"content": "service nginx start", "finish_reason": "stop"}))
        assert asking.result() == "service nginx start"


def test_relay_numbering_continues_after_earlier_files(tmp_path):
    (tmp_path / "0007.request.json").write_text("{}")
    with LLMServer(relay_dir=tmp_path, relay_poll=0.05, log=None) as server:
        asking = Asking(server, messages())
        asking.start()
        wait_for(tmp_path / "0008.request.json")
        put(tmp_path / "0008.answer.txt", "ok")
        assert asking.result() == "ok"


def test_relay_without_an_answer_ends_with_a_clear_error(tmp_path):
    with LLMServer(relay_dir=tmp_path, relay_wait=0.5, relay_poll=0.05, log=None) as server:
        conf = resolve_settings({"base_url": server.url, "model": "m", "max_retries": 0}, env={}, ini={})
        with pytest.raises(LLMError) as caught:
            LLMClient(conf).complete(messages(), {"type": "object"})
    assert caught.value.kind == "server_error" and caught.value.status == 504
    assert "no answer to request 0001 within 0.5 s" in str(caught.value)
    assert "0001.answer.json" in str(caught.value)


def test_relay_notes_a_client_that_gave_up(tmp_path):
    with LLMServer(relay_dir=tmp_path, relay_wait=30, relay_poll=0.05, log=None) as server:
        with pytest.raises(openai.APITimeoutError):
            ask(server, messages(), timeout=0.5)
        note = wait_for(tmp_path / "0001.abandoned", 5).read_text()
    assert "stopped waiting for request 0001" in note and "llm.timeout" in note


# ---------------------------------------------------------------- record and replay


def record_two(directory: Path) -> None:
    rules = [{"match": "Address already in use", "reply": {"content": plan_content("port taken", ["kill 1", "service nginx start"])}},
             {"match": "Permission denied", "reply": {"content": plan_content("perms", ["chown redis /var/lib/redis"])}}]
    with LLMServer(rules=rules, record_dir=directory, log=None) as server:
        ask(server, messages())
        ask(server, messages(detail="open() /var/lib/redis/dump.rdb failed (13: Permission denied)"))


def test_record_saves_each_exchange(tmp_path):
    record_two(tmp_path)
    saved = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    assert len(saved) == 2
    assert [s["source"] for s in saved] == ["script", "script"]
    assert json.loads(saved[0]["answer"]["content"])["commands"] == ["kill 1", "service nginx start"]
    assert saved[1]["request"]["messages"][1]["content"].endswith("EVIDENCE-00001092>>>")
    assert saved[0]["key"] != saved[1]["key"]


def test_replay_matches_despite_new_pids_and_timestamps(tmp_path):
    record_two(tmp_path / "rec")
    with LLMServer(replay_dirs=[tmp_path / "rec"], unmatched_dir=tmp_path / "miss", log=None) as server:
        answer = ask(server, messages(pid=31337, when="2026-11-30T23:59:01.123+02:00"))
        assert json.loads(answer)["diagnosis"] == "port taken"
        again = ask(server, messages(pid=9, when="Dec  1 08:15:00",
                                     detail="open() /var/lib/redis/dump.rdb failed (13: Permission denied)"))
        assert json.loads(again)["diagnosis"] == "perms"
    assert not (tmp_path / "miss").exists()


def test_replay_falls_back_to_service_failure_and_turn(tmp_path):
    record_two(tmp_path / "rec")
    changed = messages()
    # The prompt's wording changed (a new prompt version), the incident did not.
    changed[1]["content"] = changed[1]["content"].replace("Evidence:", "What the host shows:") + "\nTools: ss, kill"
    assert exchange_keys(changed)["key"] != exchange_keys(messages())["key"]
    with LLMServer(replay_dirs=[tmp_path / "rec"], log=None) as server:
        assert json.loads(ask(server, changed))["diagnosis"] == "port taken"
        # A re-ask (second user turn) is another turn: no recording of it, so no match.
        reask = changed + [{"role": "assistant", "content": "{}"}, {"role": "user", "content": "Your plan cannot be used."}]
        with pytest.raises(openai.InternalServerError):
            ask(server, reask)


def test_replay_fails_loudly_and_keeps_the_unmatched_request(tmp_path):
    record_two(tmp_path / "rec")
    other = [{"role": "user", "content": "Service: cron\nFailure: cron is not running"}]
    with LLMServer(replay_dirs=[tmp_path / "rec"], unmatched_dir=tmp_path / "miss", log=None) as server:
        conf = resolve_settings({"base_url": server.url, "model": "m", "max_retries": 0}, env={}, ini={})
        with pytest.raises(LLMError) as caught:
            LLMClient(conf).complete(other, {"type": "object"})
        assert server.unmatched and server.unmatched[0]["service"] == "cron"
    assert caught.value.kind == "server_error" and caught.value.status == 500
    assert "no transcript matches" in str(caught.value) and "'cron'" in str(caught.value)
    saved = list((tmp_path / "miss").glob("*.request.json"))
    assert len(saved) == 1 and str(saved[0]) in str(caught.value)
    assert json.loads(saved[0].read_text())["request"]["messages"] == other


def test_replay_serves_repeated_keys_in_recorded_order(tmp_path):
    with LLMServer(record_dir=tmp_path, log=None) as server:
        server.queue({"content": "first"}, {"content": "second"})
        ask(server, messages())
        ask(server, messages(pid=5))
    with LLMServer(replay_dirs=[tmp_path], log=None) as server:
        assert [ask(server, messages(pid=p)) for p in (1, 2, 3)] == ["first", "second", "second"]


def test_a_replayed_planner_run_gives_the_recorded_plan(tmp_path, run_plan):
    """The real planner's prompt, recorded once, replays with other PIDs in the evidence."""
    def plan(url: str, pid: int) -> dict:
        evidence = {"status": "nginx is not running",
                    "listeners": f"0.0.0.0:80 held by python3 (pid {pid})",
                    "logs": f"2025-01-0{pid % 9 + 1} 10:00:00 [emerg] {pid}#0: bind() to 0.0.0.0:80 failed (98)"}
        return run_plan({"service": "nginx", "error": "GET / answers 502 Bad Gateway", "evidence": evidence,
                         "backend": "llm", "llm": {"base_url": url, "model": "m", "max_retries": 0}})

    reply = {"content": plan_content("python3 holds port 80", ["service nginx restart"])}
    with LLMServer(default=reply, record_dir=tmp_path / "rec", log=None) as server:
        recorded = plan(server.url, 4242)
    with LLMServer(replay_dirs=[tmp_path / "rec"], log=None) as server:
        replayed = plan(server.url, 5151)
        assert not server.unmatched
        assert {slot[0] for slot in server.replay.served} == {"key"}   # the full key, not the fallback
    assert recorded["source"] == replayed["source"] == "llm"
    assert [c["command"] for c in replayed["commands"]] == [c["command"] for c in recorded["commands"]]


# ---------------------------------------------------------------- command line


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, str]:
    url_file = tmp_path / "url"
    proc = subprocess.Popen([sys.executable, str(SERVER), "--url-file", str(url_file), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not url_file.exists():
        if proc.poll() is not None:
            raise AssertionError(f"llm_server exited {proc.returncode}: {proc.stderr.read()}")
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return proc, url_file.read_text().strip()


def test_command_line_replay_and_relay(tmp_path):
    record_two(tmp_path / "rec")
    proc, url = _start(tmp_path, "--replay", str(tmp_path / "rec"), "--relay", str(tmp_path / "relay"),
                       "--record", str(tmp_path / "new"), "--relay-wait", "20")
    try:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=20)
        first = client.chat.completions.create(model="m", messages=messages(pid=99))
        assert json.loads(first.choices[0].message.content)["diagnosis"] == "port taken"   # replayed
        new = [{"role": "user", "content": "Service: ssh\nFailure: sshd is not running"}]
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(
            answer=client.chat.completions.create(model="m", messages=new).choices[0].message.content), daemon=True)
        thread.start()
        wait_for(tmp_path / "relay" / "0001.request.json")
        put(tmp_path / "relay" / "0001.answer.txt", "service ssh start")
        thread.join(20)
        assert result["answer"] == "service ssh start"                                   # relayed
        assert [json.loads(p.read_text())["source"] for p in (tmp_path / "new").glob("*.json")] == ["relay"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_command_line_rejects_an_empty_replay_directory(tmp_path):
    proc = subprocess.run([sys.executable, str(SERVER), "--replay", str(tmp_path)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 2
    assert "no transcript" in proc.stderr and "Traceback" not in proc.stderr


def test_a_replayed_answer_signals_the_processes_of_this_request_not_the_recordings() -> None:
    import json as _json

    from llm_server import adapt_pids

    def request(rows: str) -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: nginx\n### processes\nPID PPID USER STATE STARTED PORTS CMD\n"
                                            + rows + "### listeners\n0.0.0.0:80 held by nginx\n"}]
    recorded = request("68 1 root stopped a 80 nginx: master process\n69 68 www-data stopped a 80 nginx: worker\n"
                       "70 68 www-data stopped a 80 nginx: worker\n")
    current = request("71 1 root stopped b 80 nginx: master process\n75 71 www-data stopped b 80 nginx: worker\n"
                      "76 71 www-data stopped b 80 nginx: worker\n")
    answer = _json.dumps({"diagnosis": "stopped", "commands": ["kill -CONT 68 69 70", "sed -i '69s/a/b/' /etc/x"]})
    adapted = _json.loads(adapt_pids(answer, recorded, current))
    assert adapted["commands"] == ["kill -CONT 71 75 76", "sed -i '69s/a/b/' /etc/x"]  # only signal arguments
    assert adapt_pids("not json kill 68", recorded, current) == "not json kill 68"
    assert adapt_pids(answer, recorded, request("")) == answer  # nothing to map to: served as recorded


def test_replay_serves_a_signal_plan_for_the_processes_of_the_live_request(tmp_path) -> None:
    import json as _json

    from llm_server import LLMServer

    def messages(rows: str) -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: nginx\nFailure: GET http://127.0.0.1/ failed: timed out\n"
                                            "### processes\nPID PPID USER STATE STARTED PORTS CMD\n" + rows
                                            + "### listeners\n"}]
    plan = {"diagnosis": "stopped", "commands": ["kill -CONT 68 69"], "rationale": "resume"}
    (tmp_path / "001.json").write_text(_json.dumps({
        "request": {"model": "m", "messages": messages("68 1 root stopped a 80 nginx: master\n"
                                                       "69 68 www-data stopped a 80 nginx: worker\n")},
        "answer": {"content": _json.dumps(plan), "finish_reason": "stop"}}))
    with LLMServer(replay_dirs=[tmp_path]) as server:
        import openai

        client = openai.OpenAI(base_url=server.url, api_key="k")
        answer = client.chat.completions.create(model="m", messages=messages(
            "71 1 root stopped b 80 nginx: master\n72 71 www-data stopped b 80 nginx: worker\n"))
    assert _json.loads(answer.choices[0].message.content)["commands"] == ["kill -CONT 71 72"]


def test_transcripts_sharing_a_fallback_key_are_told_apart_by_the_request_text(tmp_path) -> None:
    import json as _json

    from llm_server import Transcripts

    def messages(evidence: str, scope: str = "Scope: postgresql") -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": f"Service: postgresql\nFailure: port 5432 is not listening\n{scope}\n"
                                            f"Evidence:\n{evidence}\n"}]
    stale = "postmaster.pid names PID 172 which is not running (stale PID file) FATAL lock file exists"
    moved = "postgresql.conf sets port = 5433 and the server listens on 127.0.0.1:5433"
    for number, (evidence, fix) in enumerate(((stale, "rm -f /var/lib/postgresql/15/main/postmaster.pid"),
                                              (moved, "sed -i 's/^port = 5433/port = 5432/' /etc/x.conf")), 1):
        (tmp_path / f"00{number}.json").write_text(_json.dumps({
            "request": {"messages": messages(evidence)}, "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    # The prompt changed since the recording (no exact key), so both share the fallback key:
    entry, _keys = replay.match(messages(moved, scope="Scope of this incident: postgresql"))
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("002.json")
    entry, _keys = replay.match(messages(stale, scope="Scope of this incident: postgresql"))
    assert entry["path"].endswith("001.json")


def test_a_fault_is_told_apart_by_its_error_lines_when_another_recording_shares_the_newer_prompt(tmp_path) -> None:
    """One recording made with an older prompt (fewer evidence sections) and one made with the
    current prompt for another fault: the request goes to the recording of its own fault."""
    import json as _json

    from llm_server import Transcripts

    sections = "\n".join(f"### section {n}\nsetting_{n} = value {n}" for n in range(40))  # the newer prompt's text

    def messages(fatal: str, newer: bool) -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: postgresql\nFailure: 15/main (port 5432): down (rc 3)\n"
                                            f"Evidence:\n2026-11-26 10:24:46.413 UTC [306] FATAL:  {fatal}\n"
                                            + (sections if newer else "")}]
    hba = "could not load pg_hba.conf"
    buffers = "could not map anonymous shared memory: Cannot allocate memory"
    for name, fatal, newer, fix in (("001.json", hba, False, "sed -i 's/scram-sha-265/scram-sha-256/' hba"),
                                    ("002.json", buffers, True, "mv conf.d/50-tuning.conf /root/")):
        (tmp_path / name).write_text(_json.dumps({
            "request": {"messages": messages(fatal, newer)}, "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(messages(hba, newer=True) + [])
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("001.json")
    entry, _keys = replay.match(messages(buffers, newer=True))
    assert entry["path"].endswith("002.json")


def test_a_later_attempt_gets_the_recording_of_that_attempt(tmp_path) -> None:
    """The planner starts a new conversation per attempt: the incident history in the request,
    not the turn, says which recorded answer (the read first, then the fix) it is asking for."""
    import json as _json

    from llm_server import Transcripts

    def messages(history: str, extra: str = "") -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: postgresql\nFailure: 15/main (port 5432): down (rc 3)\n"
                                            f"Incident history:\n{history}\nEvidence:\nFATAL:  could not access file "
                                            f"\"pg_cron\": No such file or directory\n{extra}"}]
    first = "- none: this is the first attempt"
    later = "Attempt 1 (plan from llm): read first\n  - `grep -rn shared_preload_libraries /etc` exit 0"
    for name, history, fix in (("001.json", first, "grep -rn shared_preload_libraries /etc"),
                               ("002.json", later, "sed -i 's/^shared_preload_libraries/# &/' auto.conf")):
        (tmp_path / name).write_text(_json.dumps({
            "request": {"messages": messages(history)}, "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    newer = "\n".join(f"### environment line {n}" for n in range(30))  # the prompt grew since the recording
    entry, _keys = replay.match(messages(later.replace("exit 0", "exit 0 (read-only), output:\n    | x"), newer))
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("002.json")
    entry, _keys = replay.match(messages(first, newer))
    assert entry["path"].endswith("001.json")


def test_a_flow_that_reaches_the_model_an_attempt_earlier_gets_its_faults_answer(tmp_path) -> None:
    """A fault recorded after a runbook's attempt, replayed where that runbook no longer matches:
    the request has no history, and another fault recorded at that depth must not answer it."""
    import json as _json

    from llm_server import Transcripts

    def messages(fatal: str, history: str) -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: sentinel-app\nFailure: sentinel-app.service is failed/failed\n"
                                            f"Incident history:\n{history}\nEvidence:\n"
                                            "systemd[1]: sentinel-app.service: Failed with result 'exit-code'.\n"
                                            f"sentinel-app[345]: {fatal}\n"}]
    after_runbook = "Attempt 1 (plan from runbook systemd_start_limit_hit): not healed"
    unset = "fatal: cannot read : No such file or directory"
    bad_listen = "fatal: invalid listen address '127.0.0.1:80800'"
    for name, fatal, history, fix in (("001.json", unset, after_runbook, "mv 20-environment.conf x.disabled"),
                                      ("002.json", bad_listen, "- none: this is the first attempt",
                                       "sed -i 's/80800/8080/' app.conf")):
        (tmp_path / name).write_text(_json.dumps({
            "request": {"messages": messages(fatal, history)},
            "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(messages(unset, "- none: this is the first attempt") + [])
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("001.json")
    entry, _keys = replay.match(messages(bad_listen, "- none: this is the first attempt"))
    assert entry["path"].endswith("002.json")


def test_the_recording_that_shares_the_services_fatal_line_wins_over_one_sharing_more_generic_lines(tmp_path) -> None:
    """Two PostgreSQL faults on systemd share most of their failure (the unit failed, the PID
    file is missing, pg_ctl could not start): a recording of another fault made with the
    current evidence format shares more of those lines than the fault's own older recording,
    and still must not answer it (stop 32's CI served the listen fix to the pg_cron fault)."""
    import json as _json

    from llm_server import Transcripts

    generic = ["systemd[1]: Failed to start postgresql@15-main.service",
               "postgresql@15-main[88]: pg_ctl: could not start server",
               "/var/lib/postgresql/15/main/postmaster.pid: missing",
               "/var/run/postgresql/15-main.pid: missing",
               "systemd[1]: postgresql@15-main.service: Failed with result 'protocol'."]

    def messages(lines: list) -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: postgresql\nFailure: port 5432 is not listening\n"
                                            "Evidence:\n" + "\n".join(lines) + "\n"}]
    cron = 'postgresql@15-main[88]: 2026-11-28 13:12:01 UTC [88] FATAL:  could not access file "pg_cron": No such file'
    listen = 'postgresql@15-main[91]: 2026-11-27 09:00:00 UTC [91] FATAL:  invalid list syntax for "listen_addresses"'
    older = ["Active: failed (Result: protocol)", "pg_ctl: could not start server"]
    for name, lines, fix in (("001.json", [cron, generic[0], generic[1]] + older, "sed -i '/pg_cron/d' auto.conf"),
                             ("002.json", [listen] + generic, "sed -i 's/ ::1/,::1/' 60-listen.conf")):
        (tmp_path / name).write_text(_json.dumps({
            "request": {"messages": messages(lines)}, "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(messages([cron] + generic))
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("001.json")
    entry, _keys = replay.match(messages([listen] + generic))
    assert entry["path"].endswith("002.json")


def test_a_systemd_exit_status_tells_faults_apart_across_attempt_depths(tmp_path) -> None:
    """A fault recorded after a runbook's attempt (depth 1) and replayed with no attempt before
    it: another fault recorded at depth 0 shares the same generic unit lines, the fault's own
    recording shares its specific exit status (217/USER); the own recording answers. Weekday
    names and container ids are not part of a line."""
    import json as _json

    from llm_server import Transcripts

    def messages(lines: list, history: str) -> list:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": "Service: sentinel-app\nFailure: sentinel-app.service is failed/failed\n"
                                            f"Incident history:\n{history}\nEvidence:\n" + "\n".join(lines) + "\n"}]
    generic = ["systemd[1]: sentinel-app.service: Failed with result 'exit-code'.", "ActiveState: failed"]
    user = "systemd[1]: sentinel-app.service: Main process exited, code=exited, status=217/USER"
    python = "sentinel-app[40]: Fatal Python error: init_fs_encoding: failed to get the Python codec"
    since = "Active: failed (Result: exit-code) since {} 2026-11-2{} 10:00:00 UTC; 6s ago"
    cgroup = "systemd[1]: Failed to get cgroup ID of cgroup /sys/fs/cgroup/docker/{}/x.service: Operation not permitted"
    first, after_runbook = "- none: this is the first attempt", "Attempt 1 (plan from runbook start_limit): not healed"
    for name, lines, history, fix in (
            ("001.json", [user, since.format("Thu", 6), cgroup.format("41ef33f6bc07a28f7230")] + generic,
             after_runbook, "rm 10-peer-auth.conf"),
            ("002.json", [python, "status=1/FAILURE", since.format("Sat", 8), cgroup.format("aa99ee00ff11bb22cc33")]
             + generic, first, "mv 50-python312.conf x.disabled")):
        (tmp_path / name).write_text(_json.dumps({
            "request": {"messages": messages(lines, history)}, "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(messages([user, since.format("Sat", 8), cgroup.format("0123456789abcdef0123")] + generic,
                                         first))
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("001.json")
    entry, _keys = replay.match(messages([python, since.format("Sat", 8)] + generic, first))
    assert entry["path"].endswith("002.json")


def _fenced(service: str, failure: str, sections: dict, history: str = "- none: this is the first attempt") -> list:
    """A planner request whose evidence is fenced and in sections, as the engine sends it."""
    body = "\n".join(f"### {name}\n{text}" for name, text in sections.items())
    return [{"role": "system", "content": "rules"},
            {"role": "user", "content": f"Service: {service}\nFailure: {failure}\nIncident history:\n{history}\n"
                                        f"<<<EVIDENCE-0a1b2c3d\n{body}\nEVIDENCE-0a1b2c3d>>>\n"}]


def test_what_the_service_said_outweighs_a_shared_newer_evidence_format(tmp_path) -> None:
    """Two ssh faults both leave "port 22 is not listening" and no error word a grep would catch.
    The fault's own recording is older (fewer sections); the other fault's was made with today's
    sections: the request (today's sections) goes to its own fault, by its config test's line
    (stop 38's CI served the privilege-separation fix to the missing-host-keys fault)."""
    import json as _json

    from llm_server import Transcripts

    newer = {"includes": "/etc/ssh/sshd_config:12 Include /etc/ssh/sshd_config.d/*.conf: matches nothing",
             "environment": "[/etc/default/ssh]\nsettings:\nSSHD_OPTS=",
             "paths": "/run/sshd: directory, owner root:root, mode 0755",
             "known_good": '{"drift": [], "files": 12, "recorded": "2026-11-29T07:00:00Z"}'}
    keys = "sshd: no hostkeys available -- exiting."
    privsep = "Privilege separation user sshd does not exist"

    def sections(config_test: str, today: bool) -> dict:
        return {"config_test": f"$ sshd -t\nrc 1\n{config_test}", "status": "sshd is not running ... failed!",
                "listeners": "port 22: nothing listening", **(newer if today else {})}
    for name, line, today, fix in (("001.json", keys, False, "ssh-keygen -A"),
                                   ("002.json", privsep, True, "useradd --system sshd")):
        (tmp_path / name).write_text(_json.dumps({
            "request": {"messages": _fenced("ssh", "port 22 is not listening", sections(line, today))},
            "answer": {"content": _json.dumps({"commands": [fix]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(_fenced("ssh", "port 22 is not listening", sections(keys, True)))
    assert entry["matched_by"] == "fallback_key" and entry["path"].endswith("001.json")
    entry, _keys = replay.match(_fenced("ssh", "port 22 is not listening", sections(privsep, True)))
    assert entry["path"].endswith("002.json")


def test_a_re_ask_is_answered_only_from_a_recording_that_followed_the_same_answer(tmp_path) -> None:
    """A re-ask (turn 2) carries the answer it follows; a recording of another fault's re-ask
    followed another answer and must not answer it: the request is unmatched (and kept)."""
    import json as _json

    from llm_server import Transcripts

    evidence = {"status": "sentinel-app is running", "logs": "FATAL: remaining connection slots are reserved"}
    first = _fenced("sentinel-app", "GET /health returned 503, expected 200", evidence)
    other = _fenced("sentinel-app", "GET /health returned 503, expected 200",
                    {"status": "sentinel-app is running", "logs": 'relation "visits" does not exist'})
    reask = {"role": "user", "content": "Your plan cannot be used as it is. Send a complete corrected plan."}
    answer_a = {"role": "assistant", "content": _json.dumps({"commands": ["ss -tnp"]})}
    answer_b = {"role": "assistant", "content": _json.dumps({"commands": ["psql -c 'SHOW search_path'"]})}
    (tmp_path / "001.json").write_text(_json.dumps({
        "request": {"messages": other + [answer_b, reask]},
        "answer": {"content": _json.dumps({"commands": ["ALTER ROLE app RESET search_path"]})}}))
    replay = Transcripts([tmp_path])
    entry, keys = replay.match(first + [answer_a, reask])
    assert entry is None and keys["turn"] == 2
    entry, _keys = replay.match(other + [answer_b, reask])
    assert entry is not None and entry["path"].endswith("001.json")


def test_a_recording_that_states_another_cause_is_never_served(tmp_path) -> None:
    """The only recording under the request's fallback key is of another fault (its FATAL line is
    not the request's): serving it would run another fault's fix; the request is unmatched."""
    import json as _json

    from llm_server import Transcripts

    def request(fatal: str) -> list:
        return _fenced("postgresql", "port 5432 is not listening",
                       {"status": "15/main (port 5432): down", "logs": f"FATAL:  {fatal}"})
    (tmp_path / "001.json").write_text(_json.dumps({
        "request": {"messages": request('invalid value for parameter "TimeZone": "Europe/Berln"')},
        "answer": {"content": _json.dumps({"commands": ["sed -i 's/Berln/Berlin/' tz.conf"]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(request("could not load pg_hba.conf"))
    assert entry is None
    entry, _keys = replay.match(request('invalid value for parameter "TimeZone": "Europe/Berln"'))
    assert entry is not None


def test_a_programs_own_lowercase_fatal_line_names_its_cause(tmp_path) -> None:
    """Two app faults whose only difference is the app's own "fatal: ..." line (lowercase, as many
    programs write it): the recording of the other fault, made at the request's depth, is not
    served; the fault's own recording, made one attempt later, is."""
    import json as _json

    from llm_server import Transcripts

    def request(fatal: str, history: str = "- none: this is the first attempt") -> list:
        return _fenced("sentinel-app", "sentinel-app.service is failed/failed",
                       {"status": "Active: failed (Result: exit-code)\nActiveState: failed\nSubState: failed\n"
                                  "Main PID: 88 (code=exited, status=1/FAILURE)\nRestart: on-failure",
                        "journal": "systemd[1]: sentinel-app.service: Main process exited, status=1/FAILURE\n"
                                   "systemd[1]: Failed to start sentinel-app.service\n"
                                   "systemd[1]: sentinel-app.service: Failed to get cgroup\n"
                                   f"systemd[1]: sentinel-app.service: Failed with result 'exit-code'.\n"
                                   f"sentinel-app[88]: fatal: {fatal}"}, history)
    listen = "cannot listen on 127.0.0.1:8080: Address already in use"
    unset = "cannot read : No such file or directory"
    (tmp_path / "001.json").write_text(_json.dumps({
        "request": {"messages": request(listen)}, "answer": {"content": _json.dumps({"commands": ["kill 184"]})}}))
    (tmp_path / "002.json").write_text(_json.dumps({
        "request": {"messages": request(unset, "Attempt 1 (plan from runbook start_limit): not healed")},
        "answer": {"content": _json.dumps({"commands": ["mv 20-environment.conf x.disabled"]})}}))
    replay = Transcripts([tmp_path])
    entry, _keys = replay.match(request(unset))
    assert entry is not None and entry["path"].endswith("002.json")
