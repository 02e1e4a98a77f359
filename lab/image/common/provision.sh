#!/bin/sh
# Runs inside the debootstrapped root (chroot) to finish a lab image of kind $1 (sysv or
# systemd): the parts every kind shares, then /tmp/provision/$1.sh, then the record of
# the host's tools. The files of common/rootfs and $1/rootfs are already in place.
set -eu
kind="$1"
export DEBIAN_FRONTEND=noninteractive

# The remote user: non-root, passwordless sudo (commands needing root go through become).
useradd --create-home --shell /bin/bash sentinel
echo 'sentinel ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/sentinel
chmod 0440 /etc/sudoers.d/sentinel

# Redis listens on loopback only; its data path gets its own small tmpfs at run time.
sed -i 's/^# *bind 127.0.0.1.*/bind 127.0.0.1/' /etc/redis/redis.conf

# PostgreSQL 15, cluster 15/main on 127.0.0.1:5432. Its JIT compiler is ~130 MB of LLVM
# the lab does not need: removed, and the server told so (jit = off).
# The package makes the cluster when it can; make it here when it could not (in a chroot
# without systemd, for one).
[ -f /etc/postgresql/15/main/postgresql.conf ] || pg_createcluster -u postgres 15 main >/dev/null
dpkg --purge --force-depends libllvm14 libz3-4 >/dev/null 2>&1 || true
rm -rf /usr/lib/postgresql/15/lib/llvmjit.so /usr/lib/postgresql/15/lib/llvmjit_types.bc /usr/lib/postgresql/15/lib/bitcode
cat > /etc/postgresql/15/main/conf.d/lab.conf <<'EOF'
# The lab: no JIT (LLVM is not installed); a small server for a small host.
jit = off
max_connections = 30
EOF

# The app's account, configuration, database and directories. The database password is
# made here, per image: never a secret in the repository.
useradd --system --home-dir /var/lib/sentinel-app --no-create-home --shell /usr/sbin/nologin sentinel-app
{ echo '#!/usr/bin/python3'; cat /usr/local/lib/sentinel-app/sentinel_app.py; } > /usr/local/bin/sentinel-app
chmod 0755 /usr/local/bin/sentinel-app
password="$(openssl rand -hex 16)"
single_user() {  # $1: database; SQL on stdin, one statement per line; no server, no socket
  runuser -u postgres -- /usr/lib/postgresql/15/bin/postgres --single -D /var/lib/postgresql/15/main \
    -c config_file=/etc/postgresql/15/main/postgresql.conf -c dynamic_shared_memory_type=mmap "$1" >/dev/null
}
single_user postgres <<SQL
CREATE ROLE sentinelapp LOGIN PASSWORD '$password';
CREATE DATABASE sentinelapp OWNER sentinelapp;
SQL
single_user sentinelapp <<'SQL'
CREATE TABLE visits (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
ALTER TABLE visits OWNER TO sentinelapp;
SQL
install -d -o root -g sentinel-app -m 0750 /etc/sentinel-app
cat > /etc/sentinel-app/app.conf <<EOF
# sentinel-app: the lab's web service (behind nginx at /app/)
[server]
listen = 127.0.0.1:8080

[database]
dsn = host=127.0.0.1 port=5432 dbname=sentinelapp user=sentinelapp password=$password

[storage]
dir = /var/lib/sentinel-app
EOF
chown root:sentinel-app /etc/sentinel-app/app.conf
chmod 0640 /etc/sentinel-app/app.conf
install -d -o sentinel-app -g sentinel-app -m 0750 /var/lib/sentinel-app
install -d -o sentinel-app -g adm -m 0750 /var/log/sentinel-app

# TLS for nginx on :443: a lab CA, a certificate for lab.internal/localhost/127.0.0.1 and
# an expired one from the same CA (material of the expired-certificate fault). The CA key
# is thrown away: a host has no way to renew its certificate by itself.
ca=$(mktemp -d)
cat > "$ca/ca.cnf" <<EOF
[ca]
default_ca = lab
[lab]
dir = $ca
database = $ca/index.txt
new_certs_dir = $ca
serial = $ca/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
[san]
subjectAltName = DNS:lab.internal,DNS:localhost,IP:127.0.0.1
EOF
touch "$ca/index.txt"
echo 01 > "$ca/serial"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
# shellcheck disable=SC2086  # $ec is several words on purpose
openssl req -x509 $ec -keyout "$ca/ca.key" -out "$ca/ca.crt" -days 3650 -subj "/CN=Sentinel Lab CA" 2>/dev/null
install -d -m 0755 /etc/nginx/tls /etc/sentinel
# shellcheck disable=SC2086
openssl req $ec -keyout /etc/nginx/tls/lab.key -out "$ca/lab.csr" -subj "/CN=lab.internal" 2>/dev/null
chmod 0600 /etc/nginx/tls/lab.key
sign() {  # $1: output; further arguments: validity options of `openssl ca`
  out="$1"; shift
  openssl ca -batch -config "$ca/ca.cnf" -cert "$ca/ca.crt" -keyfile "$ca/ca.key" -in "$ca/lab.csr" \
    -extensions san -notext -out "$out" "$@" 2>/dev/null
}
sign /etc/nginx/tls/lab.crt -days 3650
install -d -m 0700 /root/.lab-faults
sign /root/.lab-faults/lab-expired.crt -startdate 20230101000000Z -enddate 20240101000000Z
install -m 0644 "$ca/ca.crt" /etc/sentinel/lab-ca.crt
install -m 0644 "$ca/ca.crt" /usr/local/share/ca-certificates/sentinel-lab-ca.crt
update-ca-certificates >/dev/null 2>&1
rm -rf "$ca"

# What only this kind does.
sh "/tmp/provision/$kind.sh"

apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/locale/* /usr/share/i18n/*

# Record which tools this host has, so the planner can be told.
python3 - "$kind" <<'PY'
import json, shutil, sys
candidates = ["service", "systemctl", "journalctl", "lsof", "fuser", "killall", "ss", "ps", "pgrep", "pkill",
              "kill", "nginx", "redis-cli", "redis-server", "cron", "sshd", "sudo", "python3", "curl", "wget",
              "ip", "df", "du", "find", "tail", "dpkg", "apt-get", "mkdir", "chown", "chmod", "rm", "mv", "cp",
              "ln", "ls", "cat", "rmdir", "truncate", "sed", "logrotate", "mount", "openssl", "psql",
              "pg_ctlcluster", "pg_lsclusters", "pg_isready", "runuser", "start-stop-daemon", "sentinel-app"]
path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
have = sorted(t for t in candidates if shutil.which(t, path=path))
lacks = sorted(set(candidates) - set(have))
with open("/etc/sentinel/host-tools.json", "w", encoding="utf-8") as out:
    json.dump({"kind": sys.argv[1], "present": have, "absent": lacks}, out, separators=(",", ":"))
PY
