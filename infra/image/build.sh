#!/usr/bin/env bash
# The forwarder's container image, for linux/amd64 and linux/arm64, without a Docker daemon:
# static musl binaries of the `forwarder` cargo profile, cross-compiled by cargo-lambda (zig), then
# infra/image/Dockerfile run by buildah once per architecture into one multi-arch image, tagged
# with the crate's version.
#
#   bash infra/image/build.sh --oci DIR          the image as an OCI layout in DIR (index.json: one
#                                                image index, tag <version>, one manifest per arch)
#   bash infra/image/build.sh --push REPO[:TAG]  pushed to a registry (TAG: the crate's version);
#                                                log in first: buildah login <registry>
#   bash infra/image/build.sh --binaries DIR     only DIR/<arch>/dovetail-forwarder and
#                                                DIR/ca-certificates.crt (the Dockerfile's build stage)
#   --insecure                                   with --push: plain HTTP or an untrusted certificate
#                                                (a local registry)
#
# --oci and --push may be given together. Needs cargo-lambda and zig (in $HOME/.cache/dovetail/venv
# or on PATH: tests/run-all.sh installs them), rustup, the Debian packages ca-certificates and
# buildah. Builds in $DOVETAIL_IMAGE_TARGET_DIR, else $CARGO_TARGET_DIR, else target/ (the tests keep
# the image's musl builds apart from their own); buildah's storage is a temporary directory, removed
# at the end. Tested by tests/integration/image.rs and tests/integration/readme.rs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

die() { echo "infra/image/build.sh: $*" >&2; exit 1; }
if [ -n "${DOVETAIL_IMAGE_TARGET_DIR:-}" ]; then export CARGO_TARGET_DIR="$DOVETAIL_IMAGE_TARGET_DIR"; fi
oci="" push="" binaries="" tls_verify=true
while [ "$#" -gt 0 ]; do
  case "$1" in
    --oci) oci="${2:?--oci needs a directory}"; shift 2 ;;
    --push) push="${2:?--push needs REGISTRY/REPOSITORY[:TAG]}"; shift 2 ;;
    --binaries) binaries="${2:?--binaries needs a directory}"; shift 2 ;;
    --insecure) tls_verify=false; shift ;;
    *) die "unknown argument $1 (see the comment at the top of the script)" ;;
  esac
done
[ -n "$oci$push$binaries" ] || die "nothing to do: give --oci DIR, --push REPO[:TAG] or --binaries DIR"

# Docker's architecture names and Rust's targets: musl links statically, and resolves names
# without the NSS modules a static glibc would look for on a scratch image.
arches=(amd64 arm64)
declare -A triple=([amd64]=x86_64-unknown-linux-musl [arm64]=aarch64-unknown-linux-musl)

# Every binary, and the CA bundle the SQS client reads (rustls-native-certs: the image has no other).
build_binaries() {
  local out="$1" work arch
  PATH="$HOME/.cache/dovetail/venv/bin:$PATH"
  command -v cargo-lambda >/dev/null 2>&1 \
    || die "cargo-lambda is not installed: pip install cargo-lambda ziglang (tests/run-all.sh installs them into \$HOME/.cache/dovetail/venv)"
  command -v rustup >/dev/null 2>&1 || die "rustup is required (to add the musl targets)"
  local added
  added="$(rustup target add "${triple[@]}" 2>&1)" || die "rustup target add ${triple[*]} failed: $added"
  local bundle=/etc/ssl/certs/ca-certificates.crt
  [ -s "$bundle" ] || die "$bundle is missing: apt-get install ca-certificates"
  work="$(mktemp -d)"
  for arch in "${arches[@]}"; do
    (cd "$repo" && cargo lambda build --locked --profile forwarder --target "${triple[$arch]}" \
      -p dovetail-forwarder --lambda-dir "$work/$arch")
    mkdir -p "$out/$arch"
    cp "$work/$arch/dovetail-forwarder/bootstrap" "$out/$arch/dovetail-forwarder"
  done
  rm -rf "$work"
  cp "$bundle" "$out/ca-certificates.crt"
}

if [ -n "$binaries" ]; then
  build_binaries "$binaries"
  exit 0
fi

command -v buildah >/dev/null 2>&1 || die "buildah is not installed: apt-get install buildah (Debian/Ubuntu)"
version="$(cd "$repo" && cargo pkgid --offline -p dovetail-forwarder)"
version="${version##*[#@]}"
if [ -n "$oci" ] && [ -e "$oci" ] && [ ! -f "$oci/oci-layout" ]; then
  die "$oci exists and is not an OCI layout: not overwriting it"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Storage of its own (vfs: no overlay mounts needed), so nothing outlives the run.
b=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
build_binaries "$work/out"
mkdir "$work/context"
image="localhost/dovetail-forwarder:$version"
for arch in "${arches[@]}"; do
  # The `binaries` stage for this architecture: buildah looks a FROM image up for the platform
  # being built, so each gets an image of its own, marked with that architecture.
  container="$("${b[@]}" from scratch)"
  "${b[@]}" config --os linux --arch "$arch" "$container"
  "${b[@]}" copy "$container" "$work/out/ca-certificates.crt" /out/ >/dev/null
  "${b[@]}" copy "$container" "$work/out/$arch" "/out/$arch" >/dev/null
  "${b[@]}" commit --quiet "$container" "localhost/dovetail-forwarder-binaries:$arch" >/dev/null
  "${b[@]}" bud --quiet --isolation chroot --pull-never --platform "linux/$arch" \
    --build-arg "BINARIES=localhost/dovetail-forwarder-binaries:$arch" --build-arg "VERSION=$version" \
    --manifest "$image" -f "$here/Dockerfile" "$work/context" >/dev/null
done
if [ -n "$oci" ]; then
  rm -rf "$oci"
  mkdir -p "$(dirname "$oci")"
  "${b[@]}" manifest push --quiet --all "$image" "oci:$oci:$version"
  echo "infra/image/build.sh: $image (linux/amd64, linux/arm64) in $oci"
fi
if [ -n "$push" ]; then
  # A tag is a colon after the last slash (a registry's port is before it).
  case "${push##*/}" in *:*) ;; *) push="$push:$version" ;; esac
  "${b[@]}" manifest push --quiet --all --tls-verify="$tls_verify" "$image" "docker://$push"
  echo "infra/image/build.sh: pushed $push (linux/amd64, linux/arm64)"
fi
