# Sourced by the scripts that build the tests' Go tools from the Go module proxy
# (tests/controlplane/build.sh, tests/helm/install.sh): one lock per cache and one Go environment,
# so that the two share the module and build caches.

# go_build_lock <dir> <who>: holds <dir>/.lock (file descriptor 9) for the rest of the script, so
# that one build at a time writes a cache (developers and CI may share a machine).
go_build_lock() {
    mkdir -p "$1"
    exec 9>"$1/.lock"
    if ! flock -n 9; then
        echo "$2: another build holds $1/.lock; waiting" >&2
        flock 9
    fi
}

# go_build_env <cache> <who>: Go on PATH (or in /usr/local/go/bin), its module and build caches
# under <cache>/go, outside any workspace, no VCS stamping, static binaries.
go_build_env() {
    export PATH="$PATH:/usr/local/go/bin"
    command -v go >/dev/null || { echo "$2: Go is required (expected at /usr/local/go/bin/go)" >&2; exit 1; }
    export GOMODCACHE="$1/go/mod" GOCACHE="$1/go/build" GOWORK=off GO111MODULE=on
    export GOFLAGS="-buildvcs=false"
    export CGO_ENABLED=0
}
