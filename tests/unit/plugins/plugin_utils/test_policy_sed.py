# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sed rule (plugins/plugin_utils/policy/_sed.py): scripts that only edit text pass, any
way of running a program or touching another file is refused, however it is written."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy._sed import SedScriptError, parse_script

REDIS = policy.scope_from_service({"name": "redis-server", "units": ["redis-server.service"],
                                   "config_paths": ["/etc/redis"], "data_paths": ["/var/lib/redis"]})


@pytest.mark.parametrize("script", [
    "s/a/b/", "s/a/b/g", "s|/var/lib|/srv|2", "s#x#y#I", r"s/a\/b/c/", "s/^port = 5433$/port = 5432/",
    "/^locale-collate/d", "1d", "$d", "2,5d", "/start/,/end/d", "10,$p", "0~2d", r"\%^#%d", "/x/I,+3d",
    "$a requirepass [REDACTED]", "1i # managed", "/^bind/c bind 127.0.0.1", "y/abc/xyz/", "s/a/b/;s/c/d/",
    "s/a/b/\ns/c/d/", "/x/!d", "=", "q", "q5", ":a;N;$!ba;s/\\n/ /g", "s/a;b/c/",
])
def test_text_edits_parse(script):
    assert parse_script(script)


@pytest.mark.parametrize("script, words", [
    ("s/a/b/e", "runs the result"),
    ("s/a/b/ge", "runs the result"),
    ("1e id", "runs a shell command"),
    ("e", "runs a shell command"),
    ("$e touch /tmp/x", "runs a shell command"),
    ("s/a/b/w /tmp/out", "writes to another file"),
    ("s/a/b/gw /etc/cron.d/x", "writes to another file"),
    ("w /tmp/copy", "writes to another file"),
    ("/x/W /tmp/copy", "writes to another file"),
    ("r /etc/shadow", "reads another file"),
    ("1R /root/.ssh/id_rsa", "reads another file"),
    ("/x/{s/a/b/;e id\n}", "blocks"),
    ("s/a/b", "not closed"),
    ("s/a", "not closed"),
    ("", "empty"),
    ("k", "not a sed command"),
    ("s/a/b/ x", "unexpected"),
    ("s/a/b/;s/c/d/e", "runs the result"),
])
def test_scripts_that_run_or_reach_other_files_are_refused(script, words):
    with pytest.raises(SedScriptError, match=words):
        parse_script(script)


@pytest.mark.parametrize("command, verdict", [
    ("sed -i 's/^locale-collate /# locale-collate /' /etc/redis/redis.conf", "approval"),   # own config
    ("sed --in-place=.orig -e '/^rename-command/d' /etc/redis/redis.conf", "approval"),
    ("sed -n '2270,2290p' /etc/redis/redis.conf", "allow"),                                # a read
    ("sed -i 's/a/b/' /etc/nginx/nginx.conf", "approval"),                                 # another service's
    ("sed -i 's/a/b/' /etc/passwd", "reject"),                                             # the OS's
    ("sed -n p /etc/shadow", "reject"),                                                    # a secret
    ("sed -i 's/a/b/e' /etc/redis/redis.conf", "reject"),
    ("sed --expression='1e id' /etc/redis/redis.conf", "reject"),
    ("sed -i -e 's/a/b/' -e 'w /tmp/x' /etc/redis/redis.conf", "reject"),                  # the second script
    ("sed -f /tmp/x.sed /etc/redis/redis.conf", "reject"),
    ("sed -i 's/a/b/'", "reject"),                                                         # no file
    ("sed -i.d/../../x 's/a/b/' /etc/redis/redis.conf", "reject"),                         # a suffix with a path
    ("sed -n '1p' /var/lib/redis/dump.rdb", "approval"),                                   # dumps data
])
def test_sed_commands_are_judged_by_what_they_do_to_what(command, verdict):
    checked = policy.classify(command, scope=REDIS)
    assert checked["verdict"] == verdict, checked["reasons"]


def test_an_edit_names_its_script_for_the_approver_and_runs_as_root():
    checked = policy.classify("sed -i 's/^port 6380/port 6379/' /etc/redis/redis.conf", scope=REDIS)
    assert checked["effects"] == ["applies `s/^port 6380/port 6379/` to /etc/redis/redis.conf"]
    assert checked["become"] is True
    assert checked["argv"] == ["sed", "-i", "s/^port 6380/port 6379/", "/etc/redis/redis.conf"]


# --- read as GNU sed reads it (issue 23): where a label or a text ends decides what the next
# command is; each of these runs a program, writes or reads a file under GNU sed 4.9.
@pytest.mark.parametrize("script", [
    ":a e id",                      # a label ends at a blank; `e id` is the next command
    "bx e id\n:x",
    "tx r /etc/shadow\n:x",
    "T done w /tmp/copy\n:done",
    "s/a/b/;:x s/x/y/e",
    ":x\tR /etc/passwd",
    "1a foo\\\\\ne id",             # `\\` is one backslash: the newline ends the text
    "$i\\\nline\\\\\nw /tmp/x",
    "bx}e id",
])
def test_what_gnu_sed_reads_as_a_command_is_judged(script):
    with pytest.raises(SedScriptError):
        parse_script(script)


def test_several_expressions_are_read_joined_as_gnu_sed_joins_them():
    assert parse_script("1a foo\\\ne id") == ["1a foo\\\ne id"]      # continued text, not a command
    with pytest.raises(SedScriptError, match="runs a shell command"):
        parse_script("1a foo\ne id")


@pytest.mark.parametrize("script", ["s/a/\u00e9/", "s\u00e9a\u00e9b\u00e9", "p\r"])
def test_bytes_gnu_sed_reads_by_locale_are_refused(script):
    with pytest.raises(SedScriptError, match="printable ASCII"):
        parse_script(script)


def test_in_place_edit_through_a_link_is_refused():
    verdict = policy.classify("sed -i --follow-symlinks 's/a/b/' /etc/redis/redis.conf", policy.load_policy(), REDIS)
    assert verdict["verdict"] == "reject" and "follow-symlinks" in verdict["reasons"][0]


def _fuzz_scripts(seed: int, count: int) -> list[str]:
    import random
    rng = random.Random(seed)
    pieces = ["e id", "w /tmp/x", "r /etc/shadow", "s/a/b/", "s/a/b/e", "s/a/b/w /tmp/x", ":a", "ba", "b a", "t x",
              ":x ", "a foo\\", "a foo\\\\", "i\\", "c bar", "}", "{", "#c", "p", "1d", "$!N", "y/a/b/", "\\", "\n",
              ";", " ", "/x/", "q5", "T", "R /etc/passwd", "W /tmp/o", "s|a|b|g", "s/\\//x/", "\\%x%d", "\t"]
    alphabet = list("abewrRW:;\n\\/ s}{#1$!tTyqxp\t")
    out = []
    for n in range(count):
        if n % 2:
            out.append("".join(rng.choice(pieces + alphabet) for _piece in range(rng.randint(1, 6))))
        else:
            out.append("".join(rng.choice(alphabet) for _char in range(rng.randint(1, 12))))
    return out


def _gnu_sed() -> str | None:
    import shutil
    import subprocess
    found = shutil.which("sed")
    if found is None:
        return None
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout
    return found if "GNU sed" in version else None


@pytest.mark.skipif(_gnu_sed() is None, reason="needs GNU sed (the grammar the rule follows)")
def test_every_accepted_script_runs_in_gnu_sed_sandbox():
    """GNU sed's own parser is the oracle: `--sandbox` refuses `e`, `w`, `r` (and `s///e`,
    `s///w`) wherever GNU sed finds them; no script the policy accepts may contain one."""
    import subprocess
    sed_path = _gnu_sed() or "sed"
    accepted = []
    for script in _fuzz_scripts(23, 2500):
        try:
            parse_script(script)
        except SedScriptError:
            continue
        accepted.append(script)
    assert len(accepted) > 200, "the generator must reach the accepted grammar"
    bypass = []
    for script in accepted:
        run = subprocess.run([sed_path, "--sandbox", "-n", "-e", script, "/dev/null"], capture_output=True,
                             text=True, check=False)
        if run.returncode != 0 and "sandbox" in run.stderr:
            bypass.append((script, run.stderr.strip()))
    assert not bypass


@pytest.mark.skipif(_gnu_sed() is None, reason="needs GNU sed")
def test_the_sandbox_oracle_notices_a_hidden_command():
    import subprocess
    run = subprocess.run([_gnu_sed() or "sed", "--sandbox", "-n", "-e", ":a e id", "/dev/null"], capture_output=True,
                         text=True, check=False)
    assert run.returncode != 0 and "sandbox" in run.stderr
