#!/usr/bin/env bash
# Build the sentinel.remediation execution environment without any registry: the base from
# Debian packages (debootstrap from the mirror this host's apt uses, then `docker import`),
# Python packages from wheels downloaded on this host into the build context, collections
# from files, sentinel.remediation from the tarball `ansible-galaxy collection build` makes
# of this checkout.
#
# Two images, each built only when what makes it changes:
#   $EE_IMAGE_REPO-base:<recipe hash>   Debian, Python, ansible-core, ansible-runner, the
#                                       collection's Python packages, the docker CLI,
#                                       community.docker and community.general. The recipe
#                                       is this folder, meta/ee-requirements.txt and
#                                       extensions/awx/requirements-ee.txt.
#   $EE_IMAGE_REPO:<hash>               that base + sentinel.remediation installed from its
#                                       tarball (hash of the base tag and the collection's
#                                       FILES.json: every file's checksum). Seconds to make.
# EE_IMAGE_REPO defaults to sentinel-remediation-ee; both are also tagged :latest.
#
# Usage: lab/image/ee/build.sh [--force] [--base-only]   prints the image reference
set -euo pipefail
shopt -s inherit_errexit   # a failure inside $(build_base) stops the build too
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
repo="${EE_IMAGE_REPO:-sentinel-remediation-ee}"
force=0
base_only=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --base-only) base_only=1 ;;
    *) echo "ee image: unknown argument '$arg'; usage: build.sh [--force] [--base-only]" >&2; exit 2 ;;
  esac
done

recipe=("$here" "$root/meta/ee-requirements.txt" "$root/extensions/awx/requirements-ee.txt")
base_tag() {  # names, modes and contents of the recipe's files
  find "${recipe[@]}" -type f | LC_ALL=C sort | while read -r f; do
    printf '== %s %s\n' "${f#"$root"/}" "$([[ -x "$f" ]] && echo x)"; cat "$f"; done | sha256sum | cut -c1-12
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
  [[ -n "$uri" ]] || { echo "ee image: no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }
  echo "$uri"
}

remove_tree() {  # a build tree, never what may still be mounted inside it
  local mnt
  awk -v r="$1/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | while read -r mnt; do umount -l "$mnt" || true; done
  rm -rf --one-file-system "$1"
}

python_cmd() {  # a Python with pip on the build host (the checkout's venv when there is one)
  if [[ -x "$root/.venv/bin/python" ]]; then echo "$root/.venv/bin/python"; else command -v python3; fi
}

# The build context: wheels for the image's Python (the suite's), the community collections
# from the Ansible package's wheel, the docker CLI from Debian's docker.io package.
make_context() {  # $1: context dir, $2: the image's Python version, in full (markers compare it: 3.11.2)
  local ctx="$1" pyver="$2" python arch platforms=() minor wheel spec
  python="$(python_cmd)"
  arch="$(uname -m)"
  for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_${arch}"); done
  platforms+=(--platform "manylinux2014_${arch}")
  mkdir -p "$ctx/wheels" "$ctx/collections" "$ctx/ansible-wheel"
  cp "$here/requirements.txt" "$ctx/requirements.txt"
  cp "$root/meta/ee-requirements.txt" "$ctx/ee-requirements.txt"
  cp "$root/extensions/awx/requirements-ee.txt" "$ctx/requirements-ee.txt"
  echo "ee image: pip download (Python $pyver, $arch) into the build context" >&2
  "$python" -m pip download -q --disable-pip-version-check --dest "$ctx/wheels" --only-binary=:all: \
    --python-version "$pyver" --implementation cp "${platforms[@]}" \
    -r "$ctx/requirements.txt" -r "$ctx/ee-requirements.txt" -r "$ctx/requirements-ee.txt" >&2
  spec="$(grep -v '^[[:space:]]*#' "$here/collections.txt" | sed -n '/[^[:space:]]/{p;q}')"
  "$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$ctx/ansible-wheel" "$spec" >&2
  wheel="$(find "$ctx/ansible-wheel" -name '*.whl' -print -quit)"
  grep -v '^[[:space:]]*#' "$here/collections.txt" | sed -n '/[^[:space:]]/p' | tail -n +2 | while read -r fqcn; do
    "$python" - "$wheel" "$fqcn" "$ctx/collections" <<'PY'
import sys, zipfile
from pathlib import Path
wheel, fqcn, out = sys.argv[1:]
prefix = "ansible_collections/" + fqcn.replace(".", "/") + "/"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix)]
    if not any(n == prefix + "MANIFEST.json" for n in names):
        sys.exit(f"ee image: {fqcn} is not in {Path(wheel).name}")
    for n in names:
        z.extract(n, out)
PY
  done
  rm -rf "$ctx/ansible-wheel"
  echo "ee image: docker CLI from Debian's docker.io package" >&2
  (cd "$ctx" && apt-get download -q docker.io >/dev/null 2>&1) || { echo "ee image: apt-get download docker.io failed" >&2; exit 1; }
  mkdir -p "$ctx/docker-deb"
  dpkg-deb -x "$ctx"/docker.io_*.deb "$ctx/docker-deb"
  install -m 0755 "$ctx/docker-deb/usr/bin/docker" "$ctx/docker"
  rm -rf "$ctx/docker-deb" "$ctx"/docker.io_*.deb
}

build_base() {  # prints the base image reference
  local image tree ctx start end size mirror suite pyver packages
  image="$repo-base:$(base_tag)"
  if [[ "$force" == 0 ]] && docker image inspect "$image" >/dev/null 2>&1; then echo "$image"; return 0; fi
  mirror="${LAB_MIRROR:-$(mirror_from_host)}"
  suite="${LAB_SUITE:-bookworm}"
  packages="$(grep -hv '^[[:space:]]*#' "$here/packages.txt" | xargs | tr ' ' ',')"
  tree="$(mktemp -d /var/tmp/sentinel-ee-build.XXXXXX)"
  # shellcheck disable=SC2064  # expand now
  trap "remove_tree '$tree'" EXIT
  start=$(date +%s)
  echo "ee image: debootstrap $suite ($packages)" >&2
  debootstrap --variant=minbase --include="$packages" "$suite" "$tree/root" "$mirror" >&2
  pyver="$(chroot "$tree/root" python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
  ctx="$tree/root/tmp/ee"
  make_context "$ctx" "$pyver"
  install -m 0755 "$ctx/docker" "$tree/root/usr/local/bin/docker"
  cp -R "$ctx/collections/ansible_collections/." "$tree/root/usr/share/ansible/collections/ansible_collections/" 2>/dev/null \
    || { mkdir -p "$tree/root/usr/share/ansible/collections"; cp -R "$ctx/collections/ansible_collections" "$tree/root/usr/share/ansible/collections/"; }
  cp "$here/provision.sh" "$ctx/provision.sh"
  # A clean environment: none of the build host's settings (PIP_*, proxies) reaches the image.
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$tree/root" sh /tmp/ee/provision.sh >&2
  rm -rf "$ctx"
  tar -C "$tree/root" -c . | docker import \
    --change 'ENV HOME=/runner' \
    --change 'WORKDIR /runner' \
    --change 'CMD ["ansible-runner", "--help"]' \
    --change 'LABEL sentinel.ee=base' \
    - "$image" >&2
  docker tag "$image" "$repo-base:latest" >/dev/null
  remove_tree "$tree"
  trap - EXIT
  end=$(date +%s)
  size=$(docker image inspect "$image" --format '{{.Size}}')
  echo "ee image: built $image in $((end - start)) s, $((size / 1024 / 1024)) MiB" >&2
  echo "$image"
}

build_collection() {  # $1: base image reference; prints the image reference
  local base="$1" work tarball sum image name start
  command -v ansible-galaxy >/dev/null || { echo "ee image: ansible-galaxy is needed (the checkout's venv: source scripts/setup)" >&2; exit 2; }
  work="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  (cd "$work" && env -u ANSIBLE_CONFIG ansible-galaxy collection build --force --output-path "$work" "$root" >/dev/null)
  tarball="$(find "$work" -name 'sentinel-remediation-*.tar.gz' -print -quit)"
  sum="$( { echo "$base"; tar -xzOf "$tarball" FILES.json; } | sha256sum | cut -c1-12)"
  image="$repo:$sum"
  if [[ "$force" == 1 ]] || ! docker image inspect "$image" >/dev/null 2>&1; then
    start=$(date +%s)
    name="sentinel-ee-build-$$"
    # No network: the collection comes from its file, with no Galaxy server to ask.
    docker run --name "$name" --network none -v "$tarball:/tmp/sentinel-remediation.tar.gz:ro" "$base" \
      ansible-galaxy collection install --offline -p /usr/share/ansible/collections /tmp/sentinel-remediation.tar.gz >&2
    docker commit --change 'CMD ["ansible-runner", "--help"]' --change 'LABEL sentinel.ee=collection' \
      --change "LABEL sentinel.ee.base=$base" "$name" "$image" >/dev/null
    docker rm "$name" >/dev/null
    echo "ee image: sentinel.remediation $(basename "$tarball") into $image in $(($(date +%s) - start)) s" >&2
  fi
  docker tag "$image" "$repo:latest" >/dev/null
  rm -rf "$work"
  trap - EXIT
  echo "$image"
}

base="$(build_base)"
if [[ "$base_only" == 1 ]]; then echo "$base"; else build_collection "$base"; fi
