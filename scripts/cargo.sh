#!/usr/bin/env bash
# cargo in crates/, with its build directory shared by every checkout of this user
# ($CCBENCH_CARGO_TARGET, default ~/.cache/ccbench/cargo-target), so that a fresh clone (CI's) compiles
# only the workspace's own crates, not every dependency again in each of release, clippy and test
# mode. The binaries ccbench runs stay the checkout's own: after a `build`, each --bin named is copied
# into crates/target/release/ (where ccbench looks), under a lock, so another checkout building at the
# same moment cannot slip its binary in between.
#   bash scripts/cargo.sh build --release --quiet --bin ccmech [--bin ...]
#   bash scripts/cargo.sh clippy ... | test ... | fmt ...
# CCBENCH_CARGO_TARGET=crates/target (or any path) keeps the build inside the checkout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
command -v cargo >/dev/null || { echo "cargo is not installed: install Rust with rustup (https://rustup.rs), then re-run" >&2; exit 2; }
shared="${CCBENCH_CARGO_TARGET:-${HOME:-/root}/.cache/ccbench/cargo-target}"
case "$shared" in /*) ;; *) shared="$ROOT/$shared" ;; esac
if ! mkdir -p "$shared" 2>/dev/null || [ ! -w "$shared" ]; then
  shared="$ROOT/crates/target"  # no writable cache: the checkout's own, as before
fi
export CARGO_TARGET_DIR="$shared"
cd "$ROOT/crates"
[ "${1:-}" = "build" ] || exec cargo "$@"
bins=()
prev=""
for arg in "$@"; do
  [ "$prev" = "--bin" ] && bins+=("$arg")
  prev="$arg"
done
own="$ROOT/crates/target/release"
mkdir -p "$own"
# the lock covers the build and the copies: what is copied is what this checkout's sources built
exec 9>"$shared/.ccbench-build.lock"
flock 9
cargo "$@"
[ "$shared" = "$ROOT/crates/target" ] && exit 0
for bin in "${bins[@]}"; do
  cp -f "$shared/release/$bin" "$own/.$bin.new"
  mv -f "$own/.$bin.new" "$own/$bin"
done
