#!/bin/sh
# Runs inside the debootstrapped root (chroot) of the execution environment image. The build
# context is in /tmp/ee: wheels/ (downloaded on the build host; nothing is fetched here) and
# the requirement files. Installs them into the system Python, as an EE built by
# ansible-builder has them, and leaves no pip cache behind.
set -eu
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python3 -m pip install --break-system-packages --no-index --find-links /tmp/ee/wheels \
  -r /tmp/ee/requirements.txt -r /tmp/ee/ee-requirements.txt -r /tmp/ee/requirements-ee.txt >/dev/null
# AWX's execution environments: HOME is the job's private data directory (/runner), the
# only writable place when the image runs read-only.
mkdir -p /runner /usr/share/ansible/collections/ansible_collections
chmod 0777 /runner
# What the image is made of, for people and for tests.
python3 - <<'PY'
import importlib.metadata as md, json
print(json.dumps({d.metadata["Name"].lower(): d.version for d in md.distributions()}, sort_keys=True, indent=1),
      file=open("/etc/sentinel-ee-python.json", "w"))
PY
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /root/.cache
