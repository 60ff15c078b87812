//! What the channel is measured against, on one core without any transport: the AEAD's seal+open
//! speed (the throughput ceiling), X25519 and the Noise NN handshake alone (the handshake's floor),
//! and the cost of verifying one real SEV-SNP report and TDX quote with ccverify.

use std::time::{Duration, Instant};

use ccchannel::Cipher;
use serde::Deserialize;

use crate::result::{AeadCeiling, VerifyCost, X25519Floor};
use crate::stats::LatencySummary;

/// Seal and open 1 MiB with the channel's AEAD on one core: the ceiling for the channel's throughput.
pub fn bench_aead(quick: bool) -> AeadCeiling {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey};
    let cipher = Cipher::for_this_cpu();
    let key = LessSafeKey::new(UnboundKey::new(cipher.algorithm(), &[7u8; 32]).unwrap());
    let mut buffer = vec![0x42u8; 1 << 20];
    let budget = Duration::from_millis(if quick { 300 } else { 1500 });
    let start = Instant::now();
    let mut rounds = 0u64;
    let mut counter = 0u64;
    while start.elapsed() < budget {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&counter.to_be_bytes());
        let tag = key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buffer)
            .unwrap();
        let mut sealed = std::mem::take(&mut buffer);
        sealed.extend_from_slice(tag.as_ref());
        let plain_len = key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed)
            .unwrap()
            .len();
        sealed.truncate(plain_len);
        buffer = sealed;
        counter += 1;
        rounds += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes = rounds * (1 << 20);
    AeadCeiling {
        cipher: format!("{cipher:?}"),
        payload: 1 << 20,
        rounds,
        seconds,
        seal_open_mbps: bytes as f64 / seconds / 1e6,
    }
}

/// One X25519 key generation plus one agreement (ring), per side of an NN handshake: its floor.
pub fn bench_x25519(quick: bool) -> X25519Floor {
    use ring::agreement::{agree_ephemeral, EphemeralPrivateKey, UnparsedPublicKey, X25519};
    use snow::params::DHChoice;
    use snow::resolvers::{CryptoResolver, DefaultResolver};
    let rng = ring::rand::SystemRandom::new();
    let peer = EphemeralPrivateKey::generate(&X25519, &rng)
        .unwrap()
        .compute_public_key()
        .unwrap();
    let rounds = if quick { 500 } else { 3000 };
    // per-round samples and their median, the statistic the handshakes are reported with: a mean over
    // a tight loop on a shared machine counts every preemption against the floor
    let mut ring_samples = Vec::with_capacity(rounds);
    let mut snow_samples = Vec::with_capacity(rounds);
    let resolver = DefaultResolver;
    let mut out = [0u8; 32];
    for _ in 0..rounds {
        let start = Instant::now();
        let private = EphemeralPrivateKey::generate(&X25519, &rng).unwrap();
        let _public = private.compute_public_key().unwrap();
        agree_ephemeral(private, &UnparsedPublicKey::new(&X25519, peer.as_ref()), |secret| {
            secret[0]
        })
        .unwrap();
        ring_samples.push(start.elapsed().as_secs_f64() * 1e6);
        // the X25519 the handshake itself runs (snow's resolver: curve25519-dalek)
        let start = Instant::now();
        let mut dh = resolver.resolve_dh(&DHChoice::Curve25519).expect("X25519");
        let mut random = resolver.resolve_rng().expect("rng");
        dh.generate(&mut *random).expect("key generation");
        dh.dh(peer.as_ref(), &mut out).expect("agreement");
        snow_samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let ring_side = LatencySummary::from_samples(ring_samples).p50_us;
    let snow_side = LatencySummary::from_samples(snow_samples).p50_us;
    // the floor: two sides, each with one key generation and one agreement, with the faster library
    let per_side = ring_side.min(snow_side);
    X25519Floor {
        keygen_plus_agree_us: per_side,
        ring_keygen_plus_agree_p50_us: ring_side,
        snow_keygen_plus_agree_p50_us: snow_side,
        nn_handshake_floor_us: 2.0 * per_side,
    }
}

/// The NN handshake through `snow` alone, in memory (no channel, no evidence, no I/O): with the X25519
/// floor and the full handshake it shows where the time above the floor goes.
pub fn bench_snow_nn(quick: bool) -> LatencySummary {
    let cipher = Cipher::for_this_cpu();
    let params: snow::params::NoiseParams = format!("Noise_NN_25519_{}_SHA256", cipher.noise_name())
        .parse()
        .expect("Noise parameters");
    let rounds = if quick { 300 } else { 2000 };
    let mut samples = Vec::with_capacity(rounds);
    let (mut m1, mut m2, mut payload) = ([0u8; 128], [0u8; 128], [0u8; 128]);
    for _ in 0..rounds {
        let start = Instant::now();
        let mut initiator = snow::Builder::new(params.clone()).build_initiator().expect("initiator");
        let mut responder = snow::Builder::new(params.clone()).build_responder().expect("responder");
        let n = initiator.write_message(&[], &mut m1).expect("message 1");
        responder.read_message(&m1[..n], &mut payload).expect("read 1");
        let n = responder.write_message(&[], &mut m2).expect("message 2");
        initiator.read_message(&m2[..n], &mut payload).expect("read 2");
        std::hint::black_box((initiator.get_handshake_hash()[0], responder.get_handshake_hash()[0]));
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    LatencySummary::from_samples(samples)
}

/// The cost of verifying one real piece of evidence with ccverify (the code the channel's verifier
/// uses for SEV-SNP and TDX peers): the Milan report from the `sev` crate's test data (VCEK signature
/// and the chain to AMD's pinned roots), and the TDX quote from `dcap-qvl`'s with its DCAP collateral
/// (checked at a moment inside the collateral's validity window).
pub fn bench_verify(quick: bool) -> VerifyCost {
    const REPORT_HEX: &str = include_str!("../../../tests/data/attestation/report_milan.hex");
    const VCEK: &[u8] = include_bytes!("../../../tests/data/attestation/vcek_milan.der");
    const QUOTE: &[u8] = include_bytes!("../../../tests/data/attestation/tdx_quote.bin");
    const COLLATERAL: &[u8] = include_bytes!("../../../tests/data/attestation/tdx_quote_collateral.json");
    let report = hex::decode(REPORT_HEX.trim()).expect("the Milan report vector");
    let roots = ccverify::SnpRoots::amd();
    let policy = ccverify::Policy::default();
    let collateral = ccverify::tdx::collateral_from_json(COLLATERAL).expect("the TDX collateral vector");
    // a moment inside the collateral's validity window: after both the TCB info and the QE identity were issued
    let issued = |json: &str| -> u64 {
        let issued: Issued = serde_json::from_str(json).expect("collateral JSON with an issueDate");
        unix_from_rfc3339(&issued.issue_date).expect("issueDate")
    };
    let at = issued(&collateral.tcb_info).max(issued(&collateral.qe_identity)) + 1;
    // the VCEK alone (no CRL: the figure is the signature and chain cost), at a fixed moment inside
    // its validity period (2023-04-03 .. 2030-04-03), so the benchmark does not expire with it
    let vcek = ccverify::SnpCollateral {
        vcek: Some(VCEK),
        ..Default::default()
    };
    const VCEK_VALID_AT: u64 = 1_767_225_600; // 2026-01-01
    let rounds = if quick { 20 } else { 100 };
    let (mut snp, mut tdx) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let start = Instant::now();
        ccverify::snp::verify(&report, &vcek, &roots, &policy, None, VCEK_VALID_AT).expect("the Milan vector verifies");
        snp.push(start.elapsed().as_secs_f64() * 1e6);
        let start = Instant::now();
        ccverify::tdx::verify(QUOTE, Some(&collateral), at, &policy, None).expect("the TDX vector verifies");
        tdx.push(start.elapsed().as_secs_f64() * 1e6);
    }
    VerifyCost {
        snp_report: LatencySummary::from_samples(snp),
        tdx_quote: LatencySummary::from_samples(tdx),
    }
}

/// The one field of the TCB info and QE identity documents the benchmark reads.
#[derive(Deserialize)]
struct Issued {
    #[serde(rename = "issueDate")]
    issue_date: String,
}

/// "2024-01-02T03:04:05Z" -> seconds since the epoch (UTC), for the collateral's issue date.
fn unix_from_rfc3339(text: &str) -> Option<u64> {
    let (date, time) = text.trim_end_matches('Z').split_once('T')?;
    let d: Vec<i64> = date.split('-').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|p| p.split('.').next()?.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    // days from the civil calendar (proleptic Gregorian), March-based years
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146097 + doe - 719468;
    u64::try_from(days * 86400 + t[0] * 3600 + t[1] * 60 + t[2]).ok()
}
