//! The one JSON document the benchmark prints, as types: the contract with
//! `src/ccbench/workloads/transport.py`, which reads these keys back. A field renamed here must be
//! renamed there in the same change; `tests` below pin the keys Python reads and the shape of a
//! recorded output of the binary (`tests/data/transport/`), which the Python tests parse too.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::cli::{Pipe, Transport};
use crate::stats::LatencySummary;

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// always "ccchannel-bench"
    pub tool: String,
    pub version: String,
    /// the record cipher this CPU gets (`AesGcm` or `ChaChaPoly`)
    pub cipher: String,
    /// per transport (not plaintext) and pipe
    pub handshake: Vec<HandshakeResult>,
    /// per transport, pipe and payload size
    pub rtt: Vec<RoundTripResult>,
    pub throughput: Vec<ThroughputResult>,
    pub aead: AeadCeiling,
    pub x25519: X25519Floor,
    /// each target by name, in the order they were checked
    pub targets: IndexMap<String, TargetCheck>,
    /// the Noise NN handshake through snow alone, in memory
    pub snow_nn_handshake: LatencySummary,
    /// null unless the run included the secure channel
    pub verify: Option<VerifyCost>,
    /// null unless the run included TLS
    pub tls: Option<TlsNegotiated>,
}

/// Handshake latency of one transport over one pipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandshakeResult {
    #[serde(flatten)]
    pub latency: LatencySummary,
    pub transport: Transport,
    pub pipe: Pipe,
}

/// Request/response round trip of one payload size (the payload echoed back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundTripResult {
    #[serde(flatten)]
    pub latency: LatencySummary,
    pub transport: Transport,
    pub pipe: Pipe,
    pub payload: usize,
}

/// One-way throughput of one payload size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    pub transport: Transport,
    pub pipe: Pipe,
    pub payload: usize,
    pub messages: usize,
    pub bytes: usize,
    pub seconds: f64,
    #[serde(rename = "MBps")]
    pub mbps: f64,
    /// the secure channel only: the same messages sent with `Channel::send_in_place` (sealed in the
    /// sender's own buffer, no copy of its bytes), over a second connection right after
    #[serde(rename = "in_place_MBps", default, skip_serializing_if = "Option::is_none")]
    pub in_place_mbps: Option<f64>,
}

/// One core sealing and opening 1 MiB with the channel's AEAD: the ceiling of its throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AeadCeiling {
    pub cipher: String,
    pub payload: usize,
    pub rounds: u64,
    pub seconds: f64,
    #[serde(rename = "seal_open_MBps")]
    pub seal_open_mbps: f64,
}

/// One X25519 key generation plus one agreement per side: the floor of an NN handshake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X25519Floor {
    /// the faster library's median, per side
    pub keygen_plus_agree_us: f64,
    pub ring_keygen_plus_agree_p50_us: f64,
    pub snow_keygen_plus_agree_p50_us: f64,
    /// both sides
    pub nn_handshake_floor_us: f64,
}

/// A design target with the value this run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetCheck {
    pub value: f64,
    /// the comparison, as text (">= 2000")
    pub target: String,
    pub met: bool,
}

/// Verifying one real piece of evidence with ccverify.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyCost {
    pub snp_report: LatencySummary,
    pub tdx_quote: LatencySummary,
}

/// What rustls negotiated between the benchmark's two TLS configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlsNegotiated {
    pub version: Option<String>,
    pub suite: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// A real output of `ccchannel-bench --transport all --pipe all --handshakes 20 --sizes
    /// 1536,1048576 --quick`, recorded before the result became typed.
    const RECORDED: &str = include_str!("../../../tests/data/transport/ccchannel-bench-quick.json");

    /// Every key `workloads/transport.py` reads, as (section, key): the section's items for the
    /// lists, the section itself for the objects.
    const READ_BY_PYTHON: &[(&str, &str)] = &[
        ("", "cipher"),
        ("handshake", "pipe"),
        ("handshake", "n"),
        ("handshake", "p50_us"),
        ("handshake", "p95_us"),
        ("handshake", "p99_us"),
        ("rtt", "payload"),
        ("rtt", "pipe"),
        ("rtt", "n"),
        ("rtt", "p50_us"),
        ("rtt", "p95_us"),
        ("rtt", "p99_us"),
        ("throughput", "payload"),
        ("throughput", "pipe"),
        ("throughput", "MBps"),
        ("aead", "seal_open_MBps"),
        ("aead", "cipher"),
        ("x25519", "nn_handshake_floor_us"),
        ("x25519", "ring_keygen_plus_agree_p50_us"),
        ("x25519", "snow_keygen_plus_agree_p50_us"),
        ("snow_nn_handshake", "p50_us"),
        ("snow_nn_handshake", "n"),
        ("verify", "snp_report"),
        ("verify", "tdx_quote"),
        ("tls", "suite"),
        ("tls", "version"),
    ];

    fn summary(samples: &[f64]) -> LatencySummary {
        LatencySummary::from_samples(samples.to_vec())
    }

    fn example() -> BenchReport {
        let mut targets = IndexMap::new();
        targets.insert(
            "handshake_p50_us".to_string(),
            TargetCheck {
                value: 80.0,
                target: "<= 100".into(),
                met: true,
            },
        );
        BenchReport {
            tool: "ccchannel-bench".into(),
            version: "0.1.0".into(),
            cipher: "AesGcm".into(),
            handshake: vec![HandshakeResult {
                latency: summary(&[90.0, 80.0]),
                transport: Transport::SecureChannel,
                pipe: Pipe::Duplex,
            }],
            rtt: vec![RoundTripResult {
                latency: summary(&[12.0]),
                transport: Transport::Plain,
                pipe: Pipe::Tcp,
                payload: 1536,
            }],
            throughput: vec![ThroughputResult {
                transport: Transport::Tls,
                pipe: Pipe::Duplex,
                payload: 1 << 20,
                messages: 64,
                bytes: 64 << 20,
                seconds: 0.5,
                mbps: 134.2,
                in_place_mbps: None,
            }],
            aead: AeadCeiling {
                cipher: "AesGcm".into(),
                payload: 1 << 20,
                rounds: 10,
                seconds: 0.3,
                seal_open_mbps: 35.0,
            },
            x25519: X25519Floor {
                keygen_plus_agree_us: 40.0,
                ring_keygen_plus_agree_p50_us: 40.0,
                snow_keygen_plus_agree_p50_us: 60.0,
                nn_handshake_floor_us: 80.0,
            },
            targets,
            snow_nn_handshake: summary(&[70.0]),
            verify: Some(VerifyCost {
                snp_report: summary(&[900.0]),
                tdx_quote: summary(&[1500.0]),
            }),
            tls: Some(TlsNegotiated {
                version: Some("TLSv1_3".into()),
                suite: Some("TLS13_AES_256_GCM_SHA384".into()),
            }),
        }
    }

    /// The keys of a JSON value and of everything under it, in order: a list by its first item.
    fn shape(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
            Value::Array(items) => match items.first() {
                Some(first) if first.is_object() => Value::Array(vec![shape(first)]),
                _ => Value::String("list".into()),
            },
            Value::Number(_) => Value::String("number".into()),
            Value::String(_) => Value::String("string".into()),
            Value::Bool(_) => Value::String("bool".into()),
            Value::Null => Value::Null,
        }
    }

    #[test]
    fn the_report_serializes_every_key_the_python_side_reads() {
        let json = serde_json::to_value(example()).unwrap();
        for (section, key) in READ_BY_PYTHON {
            let holder = match &json[*section] {
                _ if section.is_empty() => &json,
                Value::Array(items) => &items[0],
                object => object,
            };
            assert!(
                holder.get(key).is_some_and(|v| !v.is_null()),
                "{section}.{key} missing from {json}"
            );
        }
        assert_eq!(json["handshake"][0]["transport"], "securechannel");
        assert_eq!(json["rtt"][0]["pipe"], "tcp");
        assert_eq!(json["targets"]["handshake_p50_us"]["met"], true);
    }

    #[test]
    fn the_report_has_the_shape_of_a_recorded_output_in_the_same_key_order() {
        let recorded: Value = serde_json::from_str(RECORDED).unwrap();
        let ours = serde_json::to_value(example()).unwrap();
        let (mut recorded_shape, mut our_shape) = (shape(&recorded), shape(&ours));
        // the targets present depend on which transports ran: compare one target's fields only
        for shape in [&mut recorded_shape, &mut our_shape] {
            let first = shape["targets"].as_object().unwrap().values().next().unwrap().clone();
            shape["targets"] = first;
        }
        // as text: JSON objects compare equal in any order, and the order is part of "unchanged"
        let text = |shape: &Value| serde_json::to_string_pretty(shape).unwrap();
        assert_eq!(text(&our_shape), text(&recorded_shape));
    }

    #[test]
    fn a_recorded_output_reads_into_the_report_and_back_unchanged() {
        let recorded: Value = serde_json::from_str(RECORDED).unwrap();
        let report: BenchReport = serde_json::from_value(recorded.clone()).unwrap();
        assert_eq!(report.rtt.len(), 12);
        assert_eq!(report.targets.len(), 10);
        assert_eq!(serde_json::to_value(&report).unwrap(), recorded);
    }

    #[test]
    fn a_run_without_tls_or_the_channel_prints_null_for_their_sections() {
        let mut report = example();
        report.verify = None;
        report.tls = None;
        let json = serde_json::to_value(report).unwrap();
        assert!(json["verify"].is_null() && json["tls"].is_null(), "{json}");
    }
}
