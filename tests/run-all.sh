#!/usr/bin/env bash
# Every test, from a fresh machine: `bash tests/run-all.sh` (README, "Two commands").
#
# Installs what the tests need into caches outside the clone (rustfmt and clippy, the aarch64 and
# musl targets, Chromium, the Python tools, cargo-lambda and zig, buildah and crane, Node.js and the
# CDK app's packages, the local Kubernetes control plane, Helm), then checks formatting and runs
# `cargo test --workspace`, linting the workspace's crates with clippy as they build.
# A warm run only checks the caches. `.ci/run` calls exactly this.
#
#   bash tests/run-all.sh                        everything, as CI does
#   bash tests/run-all.sh -p dovetail-core       set-up, then only `cargo test --locked -p dovetail-core`
#                                                (any arguments go to cargo test; the format check skipped)
set -euo pipefail
cd "$(dirname "$0")/.."

# Caches live outside the clone so warm runs are fast; 2 cores, so keep rustc parallelism low.
# Builds are kept per clone (named by its path): cargo judges a workspace file fresh by its mtime,
# so two clones sharing one target directory could each run binaries built from the other.
clone="$(basename "$PWD")-$(printf %s "$PWD" | sha256sum | cut -c1-8)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/dovetail/clones/$clone/target}"
export DOVETAIL_LAMBDA_TARGET_DIR="${DOVETAIL_LAMBDA_TARGET_DIR:-$HOME/.cache/dovetail/clones/$clone/target-lambda}"
export DOVETAIL_IMAGE_TARGET_DIR="${DOVETAIL_IMAGE_TARGET_DIR:-$HOME/.cache/dovetail/clones/$clone/target-image}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# Tests per test binary at once. libtest's default is one per core (2 here), but most integration
# tests wait on a control plane, moto or a cargo-lambda build rather than compute: while the
# SAM and CDK tests wait for the packaging test's arm64 build, two threads would leave every other
# test queued.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"
export CARGO_TERM_COLOR=never
mkdir -p "$CARGO_TARGET_DIR"

# Each step is printed with the seconds since the start, so a cold run shows where its time went.
step() { echo "== [+${SECONDS}s] $*"; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "run-all: $1 is required but not installed" >&2; exit 1; }; }
need cargo
need python3   # the embedded catalog's generator check runs it
need go        # builds the local control plane and Helm (tests/controlplane/build.sh, tests/helm/install.sh; Go 1.26 or newer)
# The Go tools build in the background while the installs below and the Rust build run: a 2-core
# cargo build leaves a core idle for long stretches (one big crate at a time). First the control
# plane (a cold build takes about 8 minutes), then Helm for the chart's tests (tests/helm/install.sh:
# about 2 minutes cold, most of its modules shared with the control plane's), one after the other
# so they take one core between them. Their log is printed if either fails; tests wait for both.
step "control plane and helm, in the background (tests/controlplane/build.sh: kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, etcd; tests/helm/install.sh; cached)"
controlplane_log="$(mktemp)"
export DOVETAIL_GO_JOBS="${DOVETAIL_GO_JOBS:-$CARGO_BUILD_JOBS}"
{ bash tests/controlplane/build.sh && bash tests/helm/install.sh; } >"$controlplane_log" 2>&1 &
controlplane_pid=$!
controlplane_ready() {
  if ! wait "$controlplane_pid"; then
    cat "$controlplane_log" >&2
    echo "run-all: the control plane or helm build failed (log above)" >&2
    exit 1
  fi
  tail -n 7 "$controlplane_log"
  rm -f "$controlplane_log"
  step "control plane and helm ready"
}

# The simulator's HTML report test renders the page in headless Chromium.
if [ ! -x /usr/bin/chromium ]; then
  step "install chromium (HTML report test)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# The venv at $HOME/.cache/dovetail/venv holds the Python tools the tests run: moto, the local AWS
# endpoint (tests/harness/moto.rs), and the SAM CLI and cfn-lint (tests/integration/infra.rs). One
# pip run installs all three pins together so the resolver keeps their shared dependencies (boto3,
# botocore) compatible with each; a warm run only checks the installed versions.
MOTO_VERSION=5.2.5
SAM_CLI_VERSION=1.170.0
CFN_LINT_VERSION=1.58.0
venv="$HOME/.cache/dovetail/venv"
if ! "$venv/bin/python" - >/dev/null 2>&1 <<EOF
import sys
from importlib.metadata import version
pins = {"moto": "$MOTO_VERSION", "aws-sam-cli": "$SAM_CLI_VERSION", "cfn-lint": "$CFN_LINT_VERSION"}
sys.exit(any(version(name) != pin for name, pin in pins.items()))
EOF
then
  step "install moto[server]==$MOTO_VERSION aws-sam-cli==$SAM_CLI_VERSION cfn-lint==$CFN_LINT_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "moto[server]==$MOTO_VERSION" "aws-sam-cli==$SAM_CLI_VERSION" "cfn-lint==$CFN_LINT_VERSION"
fi

# cargo-lambda and zig (its cross linker): the packaging test builds the three functions with
# `cargo lambda build --release --arm64` (tests/harness/lambda.rs) and runs one under
# `cargo lambda watch`. Pinned, in the same venv; the aarch64 standard library from rustup.
CARGO_LAMBDA_VERSION=1.9.2
ZIGLANG_VERSION=0.17.1
if ! "$venv/bin/cargo-lambda" lambda --version 2>/dev/null | grep -q "cargo-lambda $CARGO_LAMBDA_VERSION " \
   || ! "$venv/bin/python" -c "import sys, importlib.metadata as m; sys.exit(m.version('ziglang') != '$ZIGLANG_VERSION')" >/dev/null 2>&1; then
  step "install cargo-lambda==$CARGO_LAMBDA_VERSION ziglang==$ZIGLANG_VERSION into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "cargo-lambda==$CARGO_LAMBDA_VERSION" "ziglang==$ZIGLANG_VERSION"
fi
rustup target add aarch64-unknown-linux-gnu >/dev/null

# The forwarder image test (tests/integration/image.rs) runs infra/image/build.sh: buildah (Debian)
# builds infra/image/Dockerfile without a Docker daemon, from static musl binaries (cargo-lambda
# and zig above link them).
if ! command -v buildah >/dev/null 2>&1; then
  step "install buildah (Debian)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends buildah >/dev/null
fi
rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl >/dev/null
# The same test pushes the image to a local registry, `crane registry serve` (go-containerregistry,
# from the Go module proxy; pinned, cached).
CRANE_VERSION=v0.20.3
crane="$HOME/.cache/dovetail/tools/crane/crane"
if [ "$("$crane" version 2>/dev/null)" != "$CRANE_VERSION" ]; then
  step "install crane $CRANE_VERSION into $(dirname "$crane") (Go module proxy)"
  GOBIN="$(dirname "$crane")" go install "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
fi

# Node.js for the CDK app (infra/cdk: cdk synth, cdk-nag, its node --test assertions). Debian's
# nodejs (18 on bookworm) runs it; aws-cdk-lib declares >= 20 but needs nothing newer, and npm
# only warns. The app's packages come from its package-lock.json, with npm's cache kept outside
# the clone; a clone whose node_modules matches the lock file skips npm.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  step "install nodejs and npm (Debian)"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
lock_sum="$(sha256sum infra/cdk/package-lock.json | cut -d' ' -f1)"
if [ "$(cat infra/cdk/node_modules/.dovetail-lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
  step "npm ci (infra/cdk)"
  (cd infra/cdk && npm_config_cache="$HOME/.cache/dovetail/npm" npm ci --prefer-offline --no-audit --no-fund --no-update-notifier --loglevel=error)
  echo "$lock_sum" >infra/cdk/node_modules/.dovetail-lock-sha256
fi

# Lint while building: clippy-driver compiles the workspace's own crates (it is rustc with clippy's
# lints; dependencies still go to plain rustc), so linting costs no separate `cargo clippy` check
# build of every dependency (7 minutes on a cold 2-core machine). CLIPPY_ARGS is how cargo-clippy
# hands its lint flags to the driver. Set for every cargo run here, and inherited by the cargo
# builds tests start, so all of them share one set of fingerprints.
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" \
  || { echo "run-all: clippy-driver is required (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings"

if [ "$#" -gt 0 ]; then
  step "build: cargo test --locked --no-run $*"
  cargo test --locked --no-run "$@"
  controlplane_ready
  step "test: cargo test --locked $*"
  exec cargo test --locked "$@"
fi
# The packaging test's arm64 build (tests/harness/lambda.rs: the same command, the same build
# directory and environment, so the test's own build finds it done or waits on cargo's lock for
# it) starts now, beside the test build: it compiles every dependency again for aarch64 (20 minutes
# of a 2-core machine), and run in its turn it would start late (tests run in name order) and hold
# the SAM and CDK tests, which package its output, waiting at the end. Started here it fills the
# cores the test build leaves idle (one big crate at a time) and is done before the tests need it.
step "packaging test's arm64 build, in the background (cargo lambda build --profile lambda-check --arm64)"
packaging_log="$(mktemp)"
packaging_out="$(mktemp -d)"
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$DOVETAIL_LAMBDA_TARGET_DIR" cargo lambda build --profile lambda-check \
  --arm64 --lambda-dir "$packaging_out" -p dovetail-provisioner -p dovetail-interruption -p dovetail-sweeper \
  >"$packaging_log" 2>&1 &
packaging_pid=$!
# Likewise the forwarder image test's binaries (two more targets, the size-optimised `forwarder`
# profile): the script with the test's target directory and environment.
step "forwarder image's binaries, in the background (infra/image/build.sh --binaries)"
image_log="$(mktemp)"
image_out="$(mktemp -d)"
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$DOVETAIL_IMAGE_TARGET_DIR" bash infra/image/build.sh --binaries "$image_out" \
  >"$image_log" 2>&1 &
image_pid=$!
step "format"
cargo fmt --all -- --check
step "lint and build: cargo test --workspace --all-targets --no-run (clippy -D warnings on the workspace's crates)"
cargo test --workspace --all-targets --locked --no-run
controlplane_ready
step "test: cargo test --workspace"
log="$(mktemp)"
set +e
cargo test --workspace --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# Its outcome is the packaging test's own build (a no-op after it, or the same failure); the log
# is for when that one failed too.
wait "$packaging_pid" || { echo "run-all: the background arm64 build failed:"; tail -n 40 "$packaging_log"; }
wait "$image_pid" || { echo "run-all: the background image build failed:"; tail -n 40 "$image_log"; }
rm -rf "$packaging_log" "$packaging_out" "$image_log" "$image_out"
set -e
# One closing line for the whole run (cargo prints one per test binary, the last being doc tests).
awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
step "done (cargo test exit $status)"
exit "$status"
