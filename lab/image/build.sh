#!/usr/bin/env bash
# Build the lab image from Debian packages: debootstrap + docker import.
# The tag is a hash of this folder, so the image is rebuilt only when its recipe changes.
# Usage: lab/image/build.sh [--force]     prints the image reference on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="${LAB_IMAGE_REPO:-sentinel-lab}"
tag="$(cd "$here" && cat build.sh packages.txt provision.sh lab-boot | sha256sum | cut -c1-12)"
image="$repo:$tag"
if [[ "${1:-}" != "--force" ]] && docker image inspect "$image" >/dev/null 2>&1; then
  docker tag "$image" "$repo:latest" >/dev/null
  echo "$image"; exit 0
fi

# The mirror is whatever this host's apt already uses: never a name written in the repo.
mirror_from_host() {
  local uri=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
    uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  fi
  if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
    uri="$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' /etc/apt/sources.list)"
  fi
  [[ -n "$uri" ]] || { echo "lab image: no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }
  echo "$uri"
}
mirror="${LAB_MIRROR:-$(mirror_from_host)}"
suite="${LAB_SUITE:-bookworm}"
root="$(mktemp -d /var/tmp/sentinel-lab-root.XXXXXX)"
trap 'rm -rf "$root"' EXIT
include="$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')"
start=$(date +%s)
echo "lab image: debootstrap $suite ($include)" >&2
debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >&2
install -m 0755 "$here/lab-boot" "$root/usr/local/sbin/lab-boot"
install -m 0755 "$here/provision.sh" "$root/tmp/provision.sh"
chroot "$root" /tmp/provision.sh >&2
rm -f "$root/tmp/provision.sh"
present="$(python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["present"]))' < "$root/etc/sentinel/host-tools.json")"
absent="$(python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["absent"]))' < "$root/etc/sentinel/host-tools.json")"
tar -C "$root" -c . | docker import \
  --change 'CMD ["/usr/local/sbin/lab-boot"]' \
  --change 'LABEL sentinel.lab=true' \
  --change "LABEL sentinel.lab.tools_present=$present" \
  --change "LABEL sentinel.lab.tools_absent=$absent" \
  - "$image" >&2
docker tag "$image" "$repo:latest" >/dev/null
end=$(date +%s)
size=$(docker image inspect "$image" --format '{{.Size}}')
echo "lab image: built $image in $((end - start)) s, $((size / 1024 / 1024)) MiB" >&2
echo "$image"
