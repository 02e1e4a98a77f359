#!/usr/bin/env bash
# Build the lab images from Debian packages: debootstrap + docker import, one per host kind.
#   sysv     the original target: services under /etc/init.d scripts (`service`), no systemd
#   systemd  systemd as PID 1: journald, systemctl, journalctl, unit files, drop-ins
# A kind's recipe is this script, common/ and its own folder (packages.txt, provision.sh,
# rootfs/); its image tag is a hash of that recipe, so an image is rebuilt only when its
# recipe changes.
#
# Usage: lab/image/build.sh [--force] [sysv|systemd|all]
#   With no kind, builds every kind and prints the sysv image reference (what LAB_IMAGE has
#   always named); with a kind, builds that one and prints its reference; `all` prints
#   every kind's reference, one per line.
# Images: $LAB_IMAGE_REPO:<tag> for sysv and $LAB_IMAGE_REPO-systemd:<tag> for systemd
# (LAB_IMAGE_REPO defaults to sentinel-lab), each also tagged :latest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base_repo="${LAB_IMAGE_REPO:-sentinel-lab}"
kinds=(sysv systemd)

force=0
wanted=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    sysv|systemd|all) wanted="$arg" ;;
    *) echo "lab image: unknown argument '$arg'; usage: build.sh [--force] [sysv|systemd|all]" >&2; exit 2 ;;
  esac
done

repo_of() { if [[ "$1" == sysv ]]; then echo "$base_repo"; else echo "$base_repo-$1"; fi; }

tag_of() {  # the hash of a kind's recipe: file names and contents
  (cd "$here" && find build.sh common "$1" -type f | LC_ALL=C sort | while read -r f; do
    printf '== %s %s\n' "$f" "$([[ -x "$f" ]] && echo x)"; cat "$f"; done) | sha256sum | cut -c1-12
}

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

remove_root() {  # a build root, never what may still be mounted inside it
  local mnt
  awk -v r="$1/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | while read -r mnt; do
    umount -l "$mnt" || true
  done
  rm -rf --one-file-system "$1"
}

packages_of() { grep -hv '^[[:space:]]*#' "$here/common/packages.txt" "$here/$1/packages.txt" | xargs | tr ' ' ','; }

build_kind() {  # $1: kind; prints the image reference
  local kind="$1" repo tag image root start end size present absent init
  repo="$(repo_of "$kind")"
  tag="$(tag_of "$kind")"
  image="$repo:$tag"
  if [[ "$force" == 0 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    docker tag "$image" "$repo:latest" >/dev/null
    echo "$image"; return 0
  fi
  local mirror suite
  mirror="${LAB_MIRROR:-$(mirror_from_host)}"
  suite="${LAB_SUITE:-bookworm}"
  root="$(mktemp -d /var/tmp/sentinel-lab-root.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: each kind has its own root
  trap "remove_root '$root'" EXIT
  start=$(date +%s)
  echo "lab image ($kind): debootstrap $suite ($(packages_of "$kind"))" >&2
  debootstrap --variant=minbase --include="$(packages_of "$kind")" "$suite" "$root" "$mirror" >&2
  for tree in "$here/common/rootfs" "$here/$kind/rootfs"; do
    [[ -d "$tree" ]] && cp -R --preserve=mode "$tree/." "$root/"
  done
  mkdir -p "$root/tmp/provision"
  cp "$here/common/provision.sh" "$root/tmp/provision/common.sh"
  cp "$here/$kind/provision.sh" "$root/tmp/provision/$kind.sh"
  chroot "$root" sh /tmp/provision/common.sh "$kind" >&2
  rm -rf "$root/tmp/provision"
  present="$(python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["present"]))' < "$root/etc/sentinel/host-tools.json")"
  absent="$(python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["absent"]))' < "$root/etc/sentinel/host-tools.json")"
  if [[ "$kind" == systemd ]]; then
    init=(--change 'CMD ["/sbin/init"]' --change 'ENV container=docker')
  else
    init=(--change 'CMD ["/usr/local/sbin/lab-boot"]')
  fi
  tar -C "$root" -c . | docker import "${init[@]}" \
    --change 'LABEL sentinel.lab=true' \
    --change "LABEL sentinel.lab.kind=$kind" \
    --change "LABEL sentinel.lab.tools_present=$present" \
    --change "LABEL sentinel.lab.tools_absent=$absent" \
    - "$image" >&2
  docker tag "$image" "$repo:latest" >/dev/null
  remove_root "$root"
  trap - EXIT
  end=$(date +%s)
  size=$(docker image inspect "$image" --format '{{.Size}}')
  echo "lab image ($kind): built $image in $((end - start)) s, $((size / 1024 / 1024)) MiB" >&2
  echo "$image"
}

case "$wanted" in
  "") for kind in "${kinds[@]}"; do ref="$(build_kind "$kind")"; [[ "$kind" == sysv ]] && sysv_ref="$ref"; done
      echo "$sysv_ref" ;;
  all) for kind in "${kinds[@]}"; do build_kind "$kind"; done ;;
  *) build_kind "$wanted" ;;
esac
