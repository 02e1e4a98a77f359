# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Taking a command out of a search directory (red-team round 40, a policy decision).

A file the administrator put in /usr/local/bin, /usr/local/sbin or /opt/NAME/bin may be set
aside with approval: moved to a place no search path covers, or renamed in place with a suffix
that only marks it disabled. Its bytes are kept and no command appears. Every other move that
touches a search directory stays refused: one that lands on a search path (under another name,
in another search directory, in a user's bin), one out of a package-owned directory, a rename to
a name something may call.
"""
from __future__ import annotations

import itertools

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy, scope_from_service

NGINX = {"name": "nginx", "user": "www-data", "processes": ["nginx"], "units": ["nginx.service"],
         "config_paths": ["/etc/nginx"], "data_paths": ["/var/www"],
         "runtime_paths": ["/run/nginx", "/var/lib/nginx", "/var/cache/nginx"], "log_paths": ["/var/log/nginx"],
         "pid_files": ["/run/nginx.pid"], "ports": [80, 443]}
LOCAL = ["/usr/local/bin", "/usr/local/sbin", "/opt/shop/bin"]
AWAY = ["/root/quarantine/", "/var/tmp/", "/srv/attic/tool.sh"]
ON_A_SEARCH_PATH = ["/usr/bin/", "/bin/tool", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/tool",
                    "/opt/other/bin", "/home/ops/bin/", "/root/.local/bin/", "/root/bin/", "/usr/games/"]


def _verdict(command: str) -> str:
    return classify(command, load_policy(), scope_from_service(NGINX, [4242]))["verdict"]


@pytest.mark.parametrize(("directory", "destination"), list(itertools.product(LOCAL, AWAY)))
def test_taking_a_command_off_the_search_path_needs_approval(directory, destination):
    assert _verdict(f"mv {directory}/tool {destination}") == "approval"
    assert _verdict(f"mv -t {destination.rstrip('/').rpartition('/')[0] or '/'}/attic {directory}/tool") == "approval"


@pytest.mark.parametrize(("directory", "suffix"), list(itertools.product(LOCAL, [".disabled", ".bak", ".old", "-off"])))
def test_setting_a_command_aside_in_place_needs_approval(directory, suffix):
    assert _verdict(f"mv {directory}/tool {directory}/tool{suffix}") == "approval"


# Pairs of two different directories (the same directory is a rename, tested below).
@pytest.mark.parametrize(("directory", "destination"), [
    (d, t) for d, t in itertools.product(LOCAL, ON_A_SEARCH_PATH)
    if not (t.rstrip("/") == d or t.startswith(d + "/"))])
def test_a_move_that_lands_on_a_search_path_stays_refused(directory, destination):
    assert _verdict(f"mv {directory}/tool {destination}") == "reject"


@pytest.mark.parametrize("command", [
    "mv /usr/local/bin/tool /usr/local/bin/tool2",             # another command name
    "mv /usr/local/bin/python3 /usr/local/bin/python3.12",     # a version is a name scripts call
    "mv /usr/local/bin/tool.disabled /usr/local/bin/tool",     # puts the name back
    "mv /tmp/tool /usr/local/bin/tool",                        # puts a name in
    "chmod +x /usr/local/bin/tool",
    "mv /usr/bin/tool /root/quarantine/",                      # package-owned
    "mv /sbin/tool /root/quarantine/",
    "mv /usr/lib/tool /root/quarantine/",
    "mv /usr/local/bin/tool /root/",                           # /root holds /root/bin
    "mv /usr/local/bin/tool /dev/null",
    "mv /usr/local/bin/.ssh /root/quarantine/",                # a secret stays a secret
    "cp /tmp/tool /opt/shop/bin/",                             # search directories outside /usr too
    "chmod +x /opt/shop/bin/tool",
    "rm /opt/shop/bin/tool",
    "touch /home/ops/bin/tool",
    "ln -s /tmp/tool /root/bin/tool",
])
def test_other_moves_around_search_directories_stay_refused(command):
    assert _verdict(command) == "reject"
