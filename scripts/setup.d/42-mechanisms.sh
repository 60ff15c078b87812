#!/usr/bin/env bash
# mechanisms: rt-tests (cyclictest, the timer wake-up latency) and crates/target/release/ccmech (exit round trips, encrypted-memory bandwidth and latency, first touch)
apt_install rt-tests
if [ ! -e "$ROOT/crates" ]; then
  # a fleet host gets no source checkout: cyclictest still measures the wake-up case, and the
  # workload names the cases ccmech would have measured as skipped, with this hint
  log "crates/ is not here (a fleet host?): ccmech is not built; build it from a checkout for the exit, memory and first-touch cases"
  return 0
fi
[ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
command -v cargo >/dev/null || die "cargo is not installed: install Rust with rustup (https://rustup.rs), then re-run"
log "building crates/ccmech (cargo build --release)"
bash "$ROOT/scripts/cargo.sh" build --release --quiet --bin ccmech || die "crates/ccmech did not build"
