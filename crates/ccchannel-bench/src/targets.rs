//! The channel's design targets, checked against this run's figures: throughput against the AEAD
//! ceiling and TLS, the 1536-byte round trip against plaintext and TLS, the handshake against the
//! X25519 floor and TLS. A comparison is present only when the run measured both of its sides.

use indexmap::IndexMap;

use crate::cli::{Pipe, Transport};
use crate::result::{AeadCeiling, HandshakeResult, RoundTripResult, TargetCheck, ThroughputResult, X25519Floor};

/// The pipe the throughput and handshake targets are judged on (the channel's own cost, no kernel).
const JUDGED_PIPE: Pipe = Pipe::Duplex;
const MIB: usize = 1 << 20;
const SMALL_MESSAGE: usize = 1536;

/// The checks in the order they are made, which is the order they are printed in.
#[derive(Default)]
struct Checks(IndexMap<String, TargetCheck>);

impl Checks {
    fn add(&mut self, name: impl Into<String>, value: f64, target: &str, met: bool) {
        let target = target.to_string();
        self.0.insert(name.into(), TargetCheck { value, target, met });
    }
}

/// A figure as the JSON document held it before it was typed: a non-finite one was null, and a
/// missing figure left its targets out.
fn finite(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

fn throughput_of(results: &[ThroughputResult], transport: Transport, payload: usize) -> Option<&ThroughputResult> {
    results
        .iter()
        .find(|r| r.transport == transport && r.pipe == JUDGED_PIPE && r.payload == payload)
}

fn rtt_of(results: &[RoundTripResult], transport: Transport, pipe: Pipe) -> Option<&RoundTripResult> {
    results
        .iter()
        .find(|r| r.transport == transport && r.pipe == pipe && r.payload == SMALL_MESSAGE)
}

fn handshake_of(results: &[HandshakeResult], transport: Transport) -> Option<&HandshakeResult> {
    results
        .iter()
        .find(|r| r.transport == transport && r.pipe == JUDGED_PIPE)
}

fn throughput_targets(checks: &mut Checks, throughputs: &[ThroughputResult], aead: &AeadCeiling) {
    let (Some(sc), Some(ceiling)) = (
        throughput_of(throughputs, Transport::SecureChannel, MIB),
        finite(aead.seal_open_mbps),
    ) else {
        return;
    };
    let mbps = finite(sc.mbps).unwrap_or(0.0);
    checks.add("throughput_1MiB_MBps", mbps, ">= 2000", mbps >= 2000.0);
    // issue 32: at least 0.85 of one core's seal+open, measured in the same run
    let share = mbps / ceiling;
    checks.add("throughput_1MiB_share_of_aead", share, ">= 0.85", share >= 0.85);
    if let Some(in_place) = sc.in_place_mbps.and_then(finite) {
        let share = in_place / ceiling;
        checks.add(
            "throughput_1MiB_in_place_share_of_aead",
            share,
            ">= 0.85",
            share >= 0.85,
        );
    }
    if let Some(tls) = throughput_of(throughputs, Transport::Tls, MIB) {
        let t = finite(tls.mbps).unwrap_or(0.0);
        checks.add("throughput_1MiB_vs_tls", mbps / t, "> 1", mbps > t);
    }
}

fn rtt_targets(checks: &mut Checks, rtts: &[RoundTripResult]) {
    for pipe in [Pipe::Duplex, Pipe::Tcp] {
        let (Some(sc), Some(plain)) = (
            rtt_of(rtts, Transport::SecureChannel, pipe),
            rtt_of(rtts, Transport::Plain, pipe),
        ) else {
            continue;
        };
        let ratio = sc.latency.p50_us / plain.latency.p50_us;
        checks.add(
            format!("rtt_1536_vs_plain_{}", pipe.name()),
            ratio,
            "<= 1.15",
            ratio <= 1.15,
        );
        if let Some(tls) = rtt_of(rtts, Transport::Tls, pipe) {
            let t = sc.latency.p50_us / tls.latency.p50_us;
            checks.add(format!("rtt_1536_vs_tls_{}", pipe.name()), t, "< 1", t < 1.0);
        }
    }
}

fn handshake_targets(checks: &mut Checks, handshakes: &[HandshakeResult], x25519: &X25519Floor) {
    let Some(sc) = handshake_of(handshakes, Transport::SecureChannel) else {
        return;
    };
    let p50 = sc.latency.p50_us;
    if let Some(floor) = finite(x25519.nn_handshake_floor_us) {
        let ratio = p50 / floor;
        // issue 32: at most 1.10x the handshake's X25519 operations, measured in the same run
        checks.add("handshake_vs_x25519_floor", ratio, "<= 1.10", ratio <= 1.10);
    }
    checks.add("handshake_p50_us", p50, "<= 100", p50 <= 100.0);
    if let Some(tls) = handshake_of(handshakes, Transport::Tls) {
        let t = p50 / tls.latency.p50_us;
        checks.add("handshake_vs_tls", t, "< 1", t < 1.0);
    }
}

/// Every target this run can judge, by name.
pub fn targets(
    handshakes: &[HandshakeResult],
    rtts: &[RoundTripResult],
    throughputs: &[ThroughputResult],
    aead: &AeadCeiling,
    x25519: &X25519Floor,
) -> IndexMap<String, TargetCheck> {
    let mut checks = Checks::default();
    throughput_targets(&mut checks, throughputs, aead);
    rtt_targets(&mut checks, rtts);
    handshake_targets(&mut checks, handshakes, x25519);
    checks.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::BenchReport;

    const RECORDED: &str = include_str!("../../../tests/data/transport/ccchannel-bench-quick.json");

    #[test]
    fn the_targets_of_a_recorded_run_are_recomputed_from_its_figures() {
        let report: BenchReport = serde_json::from_str(RECORDED).unwrap();
        let again = targets(
            &report.handshake,
            &report.rtt,
            &report.throughput,
            &report.aead,
            &report.x25519,
        );
        // the same names in the same order, verdicts and texts; values to the last digits (serde_json
        // parses floats to within one unit in the last place unless asked for more)
        assert_eq!(
            again.keys().collect::<Vec<_>>(),
            report.targets.keys().collect::<Vec<_>>()
        );
        for (name, check) in &again {
            let recorded = &report.targets[name];
            assert_eq!((&check.target, check.met), (&recorded.target, recorded.met), "{name}");
            assert!(
                (check.value - recorded.value).abs() <= 1e-12 * recorded.value.abs(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_run_of_one_transport_judges_only_what_it_measured() {
        let mut report: BenchReport = serde_json::from_str(RECORDED).unwrap();
        report.handshake.retain(|r| r.transport == Transport::SecureChannel);
        report.rtt.retain(|r| r.transport == Transport::SecureChannel);
        report.throughput.retain(|r| r.transport == Transport::SecureChannel);
        let judged = targets(
            &report.handshake,
            &report.rtt,
            &report.throughput,
            &report.aead,
            &report.x25519,
        );
        let names: Vec<&str> = judged.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "throughput_1MiB_MBps",
                "throughput_1MiB_share_of_aead",
                "handshake_vs_x25519_floor",
                "handshake_p50_us"
            ]
        );
    }
}
