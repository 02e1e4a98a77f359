#!/bin/sh
# The SysV kind (run by common/provision.sh in the chroot): like the original target,
# `service` and /etc/init.d scripts, no systemd, systemctl, journalctl, lsof or fuser.
set -eu
for t in systemctl journalctl lsof fuser; do
  for d in /bin /usr/bin /sbin /usr/sbin; do rm -f "$d/$t"; done
done
chmod 0755 /etc/init.d/sentinel-app /usr/local/sbin/lab-boot
# Services are started by lab-boot (the container's PID 1 child), not by rc links.
