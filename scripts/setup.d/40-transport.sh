#!/usr/bin/env bash
# the attested secure channel (Rust) and its benchmark binary; MiniLM for the share-of-inference figure
command -v cargo >/dev/null || die "cargo is not installed: install Rust (rustup) first"
log "building crates/ (cargo build --release)"
(cd "$ROOT/crates" && cargo build --release --quiet) || die "the Rust workspace did not build"
pip_install -e "$ROOT[inference]"
