#!/usr/bin/env bash
# Bounded libFuzzer run of the secure channel's record and frame decoding (crates/fuzz, target
# `records`). Needs a nightly toolchain and cargo-fuzz; installs cargo-fuzz from crates.io if missing.
#   bash scripts/fuzz-transport.sh [SECONDS]     (default 60)
# Exit status: 0 when the run found nothing; non-zero with the crashing input under
# crates/fuzz/artifacts/records/ otherwise.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz-transport: a nightly Rust toolchain is needed: rustup toolchain install nightly" >&2
    exit 2
fi
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
cd "$root/crates"
mkdir -p fuzz/corpus/records
# seeds: one per mode byte
printf '\x00' > fuzz/corpus/records/seed-stream
printf '\x01\x02\x01\x02' > fuzz/corpus/records/seed-frame
printf '\x02\x00\x05\x01' > fuzz/corpus/records/seed-mutate
exec cargo +nightly fuzz run records -- -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048
