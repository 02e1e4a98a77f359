"""`sentinel-remediate holds`: the services the heal action leaves alone, and clearing one."""
from __future__ import annotations

import json

from sentinel_remediate import cli
from sentinel_remediate import report as r


def journal(tmp_path, host, records):
    directory = tmp_path / "remediation" / "journal"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{host}.jsonl"
    path.write_text("".join(json.dumps(rec) + "\n" for rec in records) + '{"torn', encoding="utf-8")
    return path


def test_holds_are_listed_and_a_cleared_one_is_acted_on_again(tmp_path, capsys):
    path = journal(tmp_path, "lab01", [
        {"ts": 1, "kind": "held", "host": "lab01", "service": "cron", "reason": "flapping: healed 3 times"},
        {"ts": 2, "kind": "held", "host": "lab01", "service": "nginx", "reason": "budget spent"},
        {"ts": 3, "kind": "cleared", "host": "lab01", "service": "nginx"}])
    state = ["--state-dir", str(tmp_path)]
    assert cli.main(["holds", "list", *state]) == 0
    assert capsys.readouterr().out == "lab01 cron: flapping: healed 3 times\n"

    assert cli.main(["holds", "clear", "lab01", "cron", *state]) == 0
    assert capsys.readouterr().out.startswith("cleared: lab01 cron (flapping: healed 3 times)")
    last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert last["kind"] == "cleared" and last["service"] == "cron" and last["host"] == "lab01"
    assert cli.main(["holds", "list", "--format", "json", *state]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_clearing_what_is_not_held_is_a_usage_error(tmp_path, capsys):
    journal(tmp_path, "lab01", [])
    assert cli.main(["holds", "clear", "lab01", "cron", "--state-dir", str(tmp_path)]) == r.EXIT_USAGE
    err = capsys.readouterr().err
    assert "lab01 holds no cron: nothing to clear" in err and "Traceback" not in err
