"""What runs is exactly what the policy classified: argv, program and privilege.

One lab container (lab/sentinel_lab.py, prefix from SENTINEL_LAB_PREFIX, default
`policy`). A recording stand-in is placed first on PATH under the name of every tool the
policy knows; it writes what the kernel says it was started with (/proc/self/cmdline)
and its effective uid, and runs nothing else.

1. Every command of the policy corpora that the policy allows is executed from its
   verdict's argv inside the container, without a shell (as the command module does):
   the stand-in must record exactly that argv.
2. A sample goes through a real `ansible-playbook` task shaped like the role's
   (`ansible.builtin.command` with `argv`, `expand_argument_vars: false` and the
   verdict's `become`), over the docker connection as the user `sentinel`: the recorded
   argv must equal the verdict's, words such as `$HOME` or `~root` must arrive as the
   text the policy judged, and the process must run as root exactly when `become` says.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import compile_scope

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO / "tests" / "corpora" / "policy"
STANDINS = "/opt/argv-echo"
RECORDS = "/tmp/argv-echo"
HOST = "lab01"

# Records one JSON file per start: the argv as the kernel has it, and the effective uid.
STANDIN = f"""#!/usr/bin/python3
import json, os, time
with open("/proc/self/cmdline", "rb") as handle:
    argv = [w.decode() for w in handle.read().split(b"\\0")[:-1]]
# argv[0] is the interpreter when started through the #! line; the script path follows.
argv = argv[1:] if argv and argv[0].endswith("python3") else argv
record = {{"argv": [os.path.basename(argv[0])] + argv[1:], "euid": os.geteuid(), "tag": os.environ.get("ARGV_TAG", "")}}
name = "{RECORDS}/%d-%d.json" % (time.time_ns(), os.getpid())
with open(name, "w") as out:
    json.dump(record, out)
"""

# Runs each argv without a shell, only the stand-ins on PATH, and prints what was recorded.
RUNNER = f"""
import glob, json, os, subprocess, sys
results = []
for index, argv in enumerate(json.load(sys.stdin)):
    for old in glob.glob("{RECORDS}/*.json"):
        os.unlink(old)
    env = {{"PATH": "{STANDINS}", "ARGV_TAG": str(index)}}
    link = os.path.join("{STANDINS}", argv[0])
    if not os.path.lexists(link):  # versioned names (php-fpm8.1) get their own stand-in
        os.symlink("standin", link)
    try:
        proc = subprocess.run(argv, env=env, cwd="/tmp", capture_output=True, text=True, timeout=10)
        rc, err = proc.returncode, proc.stderr[-200:]
    except OSError as exc:
        rc, err = -1, str(exc)
    runs = [json.load(open(f)) for f in sorted(glob.glob("{RECORDS}/*.json"))]
    results.append({{"argv": argv, "runs": runs, "rc": rc, "stderr": err}})
json.dump(results, sys.stdout)
"""


def _corpus_verdicts() -> list[dict[str, Any]]:
    scopes = yaml.safe_load((CORPORA / "scopes.yml").read_text(encoding="utf-8"))
    policies = {name: load_policy(over or None) for name, over in scopes["hosts"].items()}
    verdicts = []
    for path in sorted(CORPORA.glob("*.yml")):
        if path.name == "scopes.yml":
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for kind in ("legitimate", "harmful"):
            for entry in doc[kind]:
                policy = policies[entry.get("host", doc["host"])]
                scope = scopes["scopes"][entry.get("scope", doc["scope"])]
                compiled = compile_scope(scope, policy["default_scope"], policy["scope"]) if scope else None
                verdict = classify(entry["command"], policy, compiled)
                if verdict["verdict"] == "allow" and "/" not in verdict["argv"][0]:
                    verdicts.append(verdict)
    return verdicts


@pytest.fixture(scope="module")
def host(lab_factory: Callable[[str, int], Any]) -> Any:
    lab = lab_factory(os.environ.get("SENTINEL_LAB_PREFIX", "policy"), 1)
    names = set(load_policy()["tools"]) | set(load_policy()["wrappers"]) | {"runuser"}
    links = " ".join(f"ln -sf standin {STANDINS}/{name};" for name in sorted(names))
    setup = (f"mkdir -p {STANDINS} {RECORDS} && chmod 1777 {RECORDS} && cat > {STANDINS}/standin && "
             f"chmod 755 {STANDINS}/standin && cd {STANDINS} && {links}")
    lab.exec(HOST, ["sh", "-c", setup], stdin=STANDIN, check=True)
    yield lab
    lab.exec(HOST, ["rm", "-rf", STANDINS, RECORDS])


def test_every_allowed_corpus_argv_runs_exactly(host: Any) -> None:
    verdicts = _corpus_verdicts()
    assert len(verdicts) > 300, "the corpora should give hundreds of allowed commands"
    argvs = [v["argv"] for v in verdicts]
    result = host.exec(HOST, ["python3", "-c", RUNNER], stdin=json.dumps(argvs), timeout=600, check=True)
    mismatches = []
    for verdict, ran in zip(verdicts, json.loads(result.stdout)):
        recorded = [run["argv"] for run in ran["runs"]]
        if recorded != [verdict["argv"]]:
            mismatches.append((verdict["command"], verdict["argv"], recorded, ran["stderr"]))
    assert not mismatches, "\n".join(map(repr, mismatches[:20]))
    print(f"\n{len(argvs)} allowed argvs ran exactly as classified")


SAMPLE = [
    "systemctl restart nginx",
    "sudo systemctl status nginx",
    "journalctl -xeu nginx.service",
    "service nginx reload",
    "ps aux",
    "sudo ps aux",
    "ss -ltn",
    "ss -ltnp",
    "tail -n 50 /var/log/nginx/error.log",
    "grep -F '$HOME' /var/log/nginx/error.log",
    "grep -F '~root' /var/log/syslog",
    "grep -i 'worker connections' /var/log/nginx/error.log",
    "curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1/",
    "redis-cli ping",
    "sudo -u redis redis-cli info persistence",
    "kill -HUP 4242",
    "pkill -USR1 -x nginx",
    "mkdir -p /var/log/nginx",
    "chown redis:redis /var/lib/redis",
    "timeout 20 systemctl restart nginx",
    "nginx -t",
    "df -h",
]


def test_ansible_runs_the_verdict_argv_with_its_become(host: Any, tmp_path: Path) -> None:
    verdicts = [classify(command) for command in SAMPLE]
    assert all(v["verdict"] == "allow" for v in verdicts), [v for v in verdicts if v["verdict"] != "allow"]
    inventory = host.write_inventory(tmp_path / "hosts.yml")
    playbook = tmp_path / "run.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Run verdicts as the role does", "hosts": HOST, "gather_facts": False,
        "tasks": [{
            "name": "Run one verdict",
            "ansible.builtin.command": {"argv": "{{ item.argv }}", "expand_argument_vars": False},
            "become": "{{ item.become | bool }}",
            "environment": {"PATH": STANDINS, "ARGV_TAG": "{{ index }}"},
            "loop": "{{ verdicts }}",
            "loop_control": {"index_var": "index", "label": "{{ item.display }}"},
            "changed_when": True,
        }],
    }], sort_keys=False), encoding="utf-8")
    (tmp_path / "vars.json").write_text(json.dumps({"verdicts": verdicts}), encoding="utf-8")
    host.exec(HOST, ["sh", "-c", f"rm -f {RECORDS}/*.json"], check=True)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".collections")))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook),
                           "-e", f"@{tmp_path / 'vars.json'}"], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    collect = (f"import glob, json; print(json.dumps([json.load(open(f)) for f in "
               f"sorted(glob.glob('{RECORDS}/*.json'))]))")
    listing = host.exec(HOST, ["python3", "-c", collect], check=True)
    records = {int(r["tag"]): r for r in json.loads(listing.stdout)}
    assert sorted(records) == list(range(len(verdicts))), "every task started exactly one program"
    for index, verdict in enumerate(verdicts):
        record = records[index]
        assert record["argv"] == verdict["argv"], (verdict["command"], record)
        assert (record["euid"] == 0) is verdict["become"], (verdict["command"], record, verdict["become"])
    literal = records[SAMPLE.index("grep -F '$HOME' /var/log/nginx/error.log")]
    assert "$HOME" in literal["argv"], "expand_argument_vars must stay off"
    assert "~root" in records[SAMPLE.index("grep -F '~root' /var/log/syslog")]["argv"]
