#!/bin/sh
# Runs inside the debootstrapped root (chroot) to finish the lab image.
set -eu
export DEBIAN_FRONTEND=noninteractive
# The remote user: non-root, passwordless sudo (commands needing root go through become).
useradd --create-home --shell /bin/bash sentinel
echo 'sentinel ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/sentinel
chmod 0440 /etc/sudoers.d/sentinel
# Like the original target: `service` (sysvinit scripts) but no systemctl, lsof or fuser.
for t in systemctl lsof fuser; do
  for d in /bin /usr/bin /sbin /usr/sbin; do rm -f "$d/$t"; done
done
# Services are started by lab-boot, not by package scripts during the build.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/locale/*
# Redis listens on loopback only; the data path gets its own small tmpfs at run time.
sed -i 's/^# *bind 127.0.0.1.*/bind 127.0.0.1/' /etc/redis/redis.conf
# Record which tools this host has, so the planner can be told.
mkdir -p /etc/sentinel
python3 - <<'PY'
import json, shutil
candidates = ["service", "systemctl", "journalctl", "lsof", "fuser", "ss", "ps", "pgrep", "pkill",
              "kill", "nginx", "redis-cli", "redis-server", "cron", "sshd", "sudo", "python3",
              "curl", "wget", "ip", "df", "du", "find", "tail", "dpkg", "apt-get", "mkdir",
              "chown", "chmod", "rm", "mv", "cp", "truncate", "sed", "logrotate", "mount"]
have = sorted(t for t in candidates if shutil.which(t, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
lacks = sorted(set(candidates) - set(have))
json.dump({"present": have, "absent": lacks}, open("/etc/sentinel/host-tools.json", "w"), separators=(",", ":"))
PY
