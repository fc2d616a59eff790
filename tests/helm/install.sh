#!/usr/bin/env bash
# Builds Helm, which the chart's tests run (`helm lint`, `helm template`: tests/integration/helm.rs),
# and caches it at
#   ${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}/helm/<version>/helm
# where <version> is the one in tests/helm/VERSION (the harness reads the same file). A warm run
# checks the cached binary's version and prints where it is, in milliseconds.
#
# How (no Docker, no release download: only the Go module proxy): `go install` of the module
# helm.sh/helm/v3 at that version, with the version ldflags Helm's own Makefile sets, so that
# `helm version` prints the real version and `helm template`/`helm lint` assume the Kubernetes
# version of the client-go Helm is built with (the Makefile's default; without them Helm assumes
# Kubernetes 1.20). The Go module and build caches are the control plane build's
# (tests/controlplane/build.sh): the two share most of k8s.io's modules.
#
# Environment: DOVETAIL_CACHE_DIR (cache root), DOVETAIL_GO_JOBS (go build -p, default 1: the
# machines have 2 cores shared with cargo), DOVETAIL_HELM_VERSION (overrides VERSION: the harness
# then needs the same variable).
set -euo pipefail
trap 'echo "helm/install.sh: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../go-build.sh
source "$here/../go-build.sh"
version="${DOVETAIL_HELM_VERSION:-$(tr -d '[:space:]' <"$here/VERSION")}"
cache="${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}"
root="$cache/helm"
out="$root/$version"
jobs="${DOVETAIL_GO_JOBS:-1}"

[[ "$version" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || { echo "helm/install.sh: bad Helm version '$version' (want v3.MINOR.PATCH)" >&2; exit 1; }

current() {
    [[ -x "$out/helm" && "$("$out/helm" version --template '{{.Version}}' 2>/dev/null)" == "$version" ]]
}
report() { echo "helm $version ready: $out/helm"; }

if current; then
    report
    exit 0
fi

go_build_lock "$root" helm/install.sh
if current; then
    report
    exit 0
fi

go_build_env "$cache" helm/install.sh
start=$SECONDS

# Helm's go.mod names the client-go it is built with: its minor is the Kubernetes minor Helm
# assumes (as the Makefile computes it).
meta="$(cd "$(mktemp -d)" && go mod download -json "helm.sh/helm/v3@$version")"
gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$meta" | head -1)"
[[ -f "$gomod" ]] || { echo "helm/install.sh: go mod download gave no go.mod for helm.sh/helm/v3@$version:" >&2; echo "$meta" >&2; exit 1; }
client_go="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\.[0-9]*.*$/\1/p' "$gomod" | head -1)"
[[ -n "$client_go" ]] || { echo "helm/install.sh: no k8s.io/client-go v0.MINOR.PATCH require in $gomod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$client_go"
done

# Installed into a stage directory, then renamed into place (atomic: a test sees the binary
# either absent or whole).
stage="$root/.stage-$version"
rm -rf "$stage"
mkdir -p "$stage"
echo "helm: go install helm.sh/helm/v3/cmd/helm@$version (-p $jobs; Kubernetes 1.$client_go assumed)" >&2
GOBIN="$stage" go install -p "$jobs" -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version"
got="$("$stage/helm" version --template '{{.Version}}')"
[[ "$got" == "$version" ]] || { echo "helm/install.sh: the built helm reports '$got', want '$version'" >&2; exit 1; }
mkdir -p "$out"
mv -f "$stage/helm" "$out/helm"
rm -rf "$stage"
echo "helm: built $version in $((SECONDS - start)) s ($(go env GOVERSION))" >&2
report
