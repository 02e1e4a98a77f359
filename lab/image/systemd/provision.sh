#!/bin/sh
# The systemd kind (run by common/provision.sh in the chroot): systemd as PID 1, the app
# as a unit of its own, journald keeping a persistent journal.
set -eu
systemctl enable sentinel-app.service >/dev/null 2>&1
# Nothing in a lab container needs a login console or time synchronisation.
systemctl mask getty@tty1.service console-getty.service systemd-timesyncd.service >/dev/null 2>&1 || true
mkdir -p /var/log/journal
