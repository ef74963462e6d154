#!/usr/bin/env bash
# Builds the container image of lightning-store from the repository, the crates
# and Debian's packages alone (no base image, no container registry):
#   tools/image.sh [TAG]
# TAG defaults to localhost/lightning-store:<the crate's version>; the tag is
# printed on the last line of stdout.
#
# Steps: `cargo build --release --locked --bin lightning-store` (about 14
# minutes on 2 cores from a cold target/; nothing when it is up to date), then a
# build context with the binary, the libraries `ldd` lists for it (copied from
# this host), busybox from Debian's busybox-static package (downloaded with
# `apt-get download` unless BUSYBOX names a static busybox binary), the host's
# CA bundle, a passwd and group for uid 10001 and an empty data directory; then
# `podman build` (or `docker build`, or what CONTAINER_ENGINE names) of the
# Dockerfile at the root (see its header).
#
# Needs cargo, python3, ldd, Debian's or Ubuntu's apt-get and dpkg-deb (unless
# BUSYBOX is set), /etc/ssl/certs/ca-certificates.crt and podman or docker.
# The image is for this host's architecture: the release workflow runs this
# script on an amd64 and an arm64 runner.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "image.sh: $*" >&2; }

# The crate's version and target directory. The repository may be a workspace:
# the package named lightning-store is the server.
metadata=$(cargo metadata --no-deps --format-version 1)
read -r version target_dir < <(python3 -c '
import json, sys
meta = json.load(sys.stdin)
(pkg,) = [p for p in meta["packages"] if p["name"] == "lightning-store"]
print(pkg["version"], meta["target_directory"])' <<<"$metadata")
tag=${1:-localhost/lightning-store:$version}

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman; else engine=docker; fi
fi
command -v "$engine" >/dev/null || { log "no $engine: install podman (apt-get install podman)"; exit 1; }

log "cargo build --release --locked --bin lightning-store (version $version)"
cargo build --release --locked --bin lightning-store >&2
binary=$target_dir/release/lightning-store

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
mkdir -p "$root/usr/local/bin" "$root/bin" "$root/etc/ssl/certs" "$root/tmp" "$ctx/data"
chmod 1777 "$root/tmp"
install -m 0755 "$binary" "$root/usr/local/bin/lightning-store"

# The libraries the binary links, at the paths the loader looks for them, and
# the loader itself (the `ldd` line without `=>`). Each copy is the file the
# path resolves to, so no host symlink dangles in the image.
log "libraries (ldd):"
ldd "$binary" | while read -r first second third _; do
  case "$second" in
    "=>") path=$third ;;
    *) path=$first ;;
  esac
  case "$path" in
    /*) ;;
    *) continue ;; # linux-vdso.so.1: the kernel's
  esac
  echo "  $path" >&2
  mkdir -p "$root$(dirname "$path")"
  cp -L "$path" "$root$path"
done

# A shell and the few tools the chart's `helm test` pod runs (sh, sed, grep,
# test), from Debian's statically linked busybox.
busybox=${BUSYBOX:-}
if [ -z "$busybox" ]; then
  (cd "$ctx" && apt-get download busybox-static >&2 2>/dev/null) || {
    log "apt-get download busybox-static failed; apt-get update and again"
    apt-get update -qq >&2
    (cd "$ctx" && apt-get download busybox-static >&2)
  }
  dpkg-deb -x "$ctx"/busybox-static_*.deb "$ctx/busybox-static"
  busybox=$ctx/busybox-static/bin/busybox
fi
install -m 0755 "$busybox" "$root/bin/busybox"
for applet in sh sed grep test [ env cat ls echo sleep head tail cut tr wc mkdir rm id; do
  ln -s busybox "$root/bin/$applet"
done

cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
lightning-store:x:10001:10001:lightning-store:/var/lib/lightning-store:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
lightning-store:x:10001:
nogroup:x:65534:
EOF
cp Dockerfile "$ctx/Dockerfile"

log "$engine build -t $tag"
"$engine" build --quiet -t "$tag" -f "$ctx/Dockerfile" "$ctx" >&2
echo "$tag"
