#!/usr/bin/env bash
# transport: the attested secure channel (crates/, Rust), its benchmark binary
# crates/target/release/ccchannel-bench and the evidence verifier crates/target/release/ccverify
# (SEV-SNP and TDX; `ccbench verify` runs it), the mechanism probe crates/target/release/ccmech; MiniLM (the inference extra) for the share-of-inference figure.
[ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
need_checkout crates "the secure channel's benchmark binary"
command -v cargo >/dev/null || die "cargo is not installed: install Rust with rustup (https://rustup.rs), then re-run"
command -v cc >/dev/null || apt_install gcc   # ring compiles its assembly with the C toolchain
command -v openssl >/dev/null || apt_install openssl   # the verifier's tests generate their test chain with it
log "building crates/ (cargo build --release through scripts/cargo.sh; a few minutes the first time, the dependencies kept in ~/.cache/ccbench/cargo-target)"
bash "$ROOT/scripts/cargo.sh" build --release --quiet --bin ccchannel-bench --bin ccverify --bin ccmech || die "the Rust workspace in crates/ did not build"
pip_install_project inference
