#!/usr/bin/env bash
# Bounded libFuzzer runs (crates/fuzz): the secure channel's record and frame decoding (target
# `records`), then SEV-SNP report, certificate table and TDX quote parsing and SNP verification
# and AMD CRL parsing and checking (target `evidence`, seeded with the real vectors in
# tests/data/attestation and a CRL made here with the openssl command line). Needs a nightly
# toolchain and cargo-fuzz; installs cargo-fuzz from crates.io if missing.
#   bash scripts/fuzz-transport.sh [SECONDS]     (default 60 per target)
# Exit status: 0 when the runs found nothing; non-zero with the crashing input under
# crates/fuzz/artifacts/<target>/ otherwise.
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
cargo +nightly fuzz run records -- -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048
mkdir -p fuzz/corpus/evidence
# seeds: the real Milan report (mode 0) and TDX quote (mode 2), a certificate table header (mode 1)
{ printf '\x00'; python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(open(sys.argv[1]).read().strip()))' \
    "$root/tests/data/attestation/report_milan.hex"; } > fuzz/corpus/evidence/seed-snp
{ printf '\x02'; cat "$root/tests/data/attestation/tdx_quote.bin"; } > fuzz/corpus/evidence/seed-tdx
printf '\x01\x00' > fuzz/corpus/evidence/seed-table
# a CRL (mode 3) in AMD's shape: RSA-PSS/SHA-384 by a throwaway root under AMD's Milan ARK name (so the
# issuer check passes and the signature check is reached), listing one serial
crl_dir="$(mktemp -d)"
(
    cd "$crl_dir"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ark.key \
        -subj "/OU=Engineering/C=US/L=Santa Clara/ST=CA/O=Advanced Micro Devices/CN=ARK-Milan" -days 30 -out ark.pem \
        -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:48 -sha384 2>/dev/null
    printf '[ ca ]\ndefault_ca = c\n[ c ]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha384\n' > ca.cnf
    : > index.txt
    echo 01 > crlnumber
    openssl ca -config ca.cnf -keyfile ark.key -cert ark.pem -revoke ark.pem 2>/dev/null
    openssl ca -config ca.cnf -keyfile ark.key -cert ark.pem -gencrl -crldays 30 -sigopt rsa_padding_mode:pss \
        -sigopt rsa_pss_saltlen:48 -out crl.pem 2>/dev/null
    openssl crl -in crl.pem -outform DER -out crl.der
)
{ printf '\x03'; cat "$crl_dir/crl.der"; } > fuzz/corpus/evidence/seed-crl
rm -rf "$crl_dir"
exec cargo +nightly fuzz run evidence -- -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048
