#!/usr/bin/env bash
# mechanisms: rt-tests (cyclictest, the timer wake-up latency) and crates/target/release/ccmech (exit round trips, encrypted-memory bandwidth and latency, first touch)
apt_install rt-tests
[ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
need_checkout crates "the mechanism probe ccmech"
command -v cargo >/dev/null || die "cargo is not installed: install Rust with rustup (https://rustup.rs), then re-run"
log "building crates/ccmech (cargo build --release)"
(cd "$ROOT/crates" && cargo build --release --quiet --bin ccmech) || die "crates/ccmech did not build"
