//! Security tests: tampering, replay, reordering, dropping, truncation, oversize lengths, and
//! evidence bound to the wrong handshake, static key, technology or measurement.

use std::sync::Arc;
use std::time::Duration;

use ccchannel::attestation::{binding, Evidence, REPORT_DATA_LEN};
use ccchannel::{
    accept, connect, AttestationProvider, Channel, ChannelError, Config, DType, Frame, MockProvider, Pattern, Policy,
    ProtocolViolation, RecordType, RejectReason, StaticKey,
};
use tokio::io::{duplex, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};

const MEASUREMENT: &str = "ccbench-test-image";

fn policy(provider: &MockProvider) -> Policy {
    Policy {
        technologies: vec!["mock-snp".into()],
        measurement: Some(provider.measurement_hex()),
        max_age: Duration::from_secs(60),
    }
}

fn configs(pattern: Pattern) -> (Config, Config) {
    let provider = MockProvider::new("mock-snp", MEASUREMENT);
    let mut server = Config::new(pattern);
    let mut client = Config::new(pattern);
    server.provider = Some(Arc::new(provider.clone()));
    client.verify_peer = Some(policy(&provider));
    if pattern == Pattern::XX {
        server.static_key = Some(StaticKey::generate(server.cipher).unwrap());
        client.static_key = Some(StaticKey::generate(client.cipher).unwrap());
    }
    (client, server)
}

type Handshaken = Result<Channel<DuplexStream>, ChannelError>;

/// Both sides of one handshake over an in-memory pipe of `buffer` bytes: (client, server).
async fn handshake(client: &Config, server: &Config, buffer: usize) -> (Handshaken, Handshaken) {
    let (a, b) = duplex(buffer);
    tokio::join!(connect(a, client), accept(b, server))
}

async fn pair(
    client: &Config,
    server: &Config,
) -> Result<(Channel<DuplexStream>, Channel<DuplexStream>), ChannelError> {
    let (c, s) = handshake(client, server, 1 << 20).await;
    Ok((c?, s?))
}

#[tokio::test]
async fn round_trip_bytes_tensor_and_large_messages() {
    for pattern in [Pattern::NN, Pattern::XX] {
        let (client, server) = configs(pattern);
        let (mut c, mut s) = pair(&client, &server).await.unwrap();
        assert_eq!(c.handshake_hash(), s.handshake_hash());
        assert_eq!(c.peer_claims().unwrap().technology, "mock-snp");
        assert_eq!(
            c.peer_claims().unwrap().revocation,
            None,
            "mock evidence has no vendor chain"
        );
        let big: Vec<u8> = (0..(3 << 20) + 17).map(|i| (i % 251) as u8).collect();
        let embedding: Vec<u8> = (0..384 * 4).map(|i| i as u8).collect();
        let sender = async {
            c.send(&Frame::bytes(b"hello")).await.unwrap();
            c.send(&Frame::tensor(DType::F32, &[1, 384], &embedding).unwrap())
                .await
                .unwrap();
            c.send(&Frame::bytes(&big)).await.unwrap();
            c.close().await.unwrap();
        };
        let receiver = async {
            let mut got = Vec::new();
            while let Some(frame) = s.recv().await.unwrap() {
                got.push(frame);
            }
            got
        };
        let (_, got) = tokio::join!(sender, receiver);
        assert_eq!(got[0], Frame::bytes(b"hello").clone());
        match &got[1] {
            Frame::Tensor { dtype, shape, data } => {
                assert_eq!(
                    (*dtype, shape.as_slice(), data.len()),
                    (DType::F32, &[1u64, 384][..], 384 * 4)
                )
            }
            other => panic!("expected a tensor, got {other:?}"),
        }
        assert_eq!(got[2].payload(), &big[..]);
        assert_eq!(got.len(), 3);
    }
}

#[tokio::test]
async fn rekey_keeps_the_channel_working() {
    let (mut client, server) = configs(Pattern::NN);
    client.rekey_after = 10_000;
    let (mut c, mut s) = pair(&client, &server).await.unwrap();
    let data = vec![7u8; 150_000];
    let sender = async {
        for _ in 0..20 {
            c.send(&Frame::bytes(&data)).await.unwrap();
        }
        c.close().await.unwrap();
    };
    let receiver = async {
        let mut count = 0;
        while let Some(frame) = s.recv().await.unwrap() {
            assert_eq!(frame.payload(), &data[..]);
            count += 1;
        }
        count
    };
    let (_, count) = tokio::join!(sender, receiver);
    assert_eq!(count, 20);
}

/// Records as they went over the wire: one channel writes, the test captures and manipulates.
async fn capture(messages: &[&[u8]]) -> (Vec<Vec<u8>>, Channel<DuplexStream>) {
    let (client, server) = configs(Pattern::NN);
    let (c, s) = pair(&client, &server).await.unwrap();
    let (tap_writer, mut tap_reader) = duplex(8 << 20);
    let mut c = c.replace_stream(tap_writer);
    for message in messages {
        c.send(&Frame::bytes(message)).await.unwrap();
    }
    drop(c);
    let mut wire = Vec::new();
    tap_reader.read_to_end(&mut wire).await.unwrap();
    let mut records = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        // header: u32 ciphertext length, type, and for START (type 1) kind + u64 total length
        let len = u32::from_be_bytes(wire[at..at + 4].try_into().unwrap()) as usize;
        let header = if wire[at + 4] == 1 { 14 } else { 5 };
        records.push(wire[at..at + header + len].to_vec());
        at += header + len;
    }
    (records, s)
}

async fn deliver(receiver: Channel<DuplexStream>, bytes: Vec<u8>, close: bool) -> (Vec<Vec<u8>>, ChannelError) {
    let (mut feed, stream) = duplex(8 << 20);
    let mut receiver = receiver.replace_stream(stream);
    feed.write_all(&bytes).await.unwrap();
    if close {
        drop(feed);
    }
    let mut released = Vec::new();
    loop {
        match receiver.recv().await {
            Ok(Some(frame)) => released.push(frame.payload().to_vec()),
            Ok(None) => panic!("no close record was sent"),
            Err(error) => {
                // after an error the channel stays closed
                assert_eq!(receiver.recv().await.unwrap_err(), ChannelError::Closed);
                return (released, error);
            }
        }
    }
}

#[tokio::test]
async fn a_flipped_bit_anywhere_is_rejected_with_no_plaintext() {
    // the untouched record opens with the receiver of its own handshake (each capture is a new one)
    let (records, receiver) = capture(&[b"secret embedding"]).await;
    let (released, error) = deliver(receiver, records[0].clone(), true).await;
    assert_eq!(
        (released, error),
        (vec![b"secret embedding".to_vec()], ChannelError::Truncated)
    );
    let length = records[0].len();
    for position in 0..length {
        for bit in [0u8, 3, 7] {
            // tampered records are given to the receiver of the handshake that keyed them
            let (records, receiver) = capture(&[b"secret embedding"]).await;
            let mut tampered = records[0].clone();
            tampered[position] ^= 1 << bit;
            let (released, error) = deliver(receiver, tampered, true).await;
            assert!(
                released.is_empty(),
                "plaintext released after tampering at byte {position} bit {bit}"
            );
            // the body and the authenticated header fail authentication; a changed length either
            // fails authentication, runs out of data, or exceeds the maximum before any allocation
            assert!(
                matches!(
                    error,
                    ChannelError::Decrypt
                        | ChannelError::Truncated
                        | ChannelError::RecordTooLarge { .. }
                        | ChannelError::MessageTooLarge { .. }
                ),
                "byte {position} bit {bit}: {error:?}"
            );
            if position >= 5 {
                assert!(
                    matches!(error, ChannelError::Decrypt | ChannelError::MessageTooLarge { .. }),
                    "byte {position}: {error:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn replayed_reordered_and_dropped_records_are_errors() {
    let messages: [&[u8]; 3] = [b"one", b"two", b"three"];
    // replay: the first record twice
    let (records, receiver) = capture(&messages).await;
    let (released, error) = deliver(receiver, [records[0].clone(), records[0].clone()].concat(), true).await;
    assert_eq!(released, vec![b"one".to_vec()]);
    assert_eq!(error, ChannelError::Decrypt);
    // reorder: two before one
    let (records, receiver) = capture(&messages).await;
    let (released, error) = deliver(receiver, [records[1].clone(), records[0].clone()].concat(), true).await;
    assert!(released.is_empty());
    assert_eq!(error, ChannelError::Decrypt);
    // drop: one then three
    let (records, receiver) = capture(&messages).await;
    let (released, error) = deliver(receiver, [records[0].clone(), records[2].clone()].concat(), true).await;
    assert_eq!(released, vec![b"one".to_vec()]);
    assert_eq!(error, ChannelError::Decrypt);
}

#[tokio::test]
async fn truncation_is_an_error() {
    // the stream ends in the middle of a record
    let (records, receiver) = capture(&[b"one"]).await;
    let cut = records[0][..records[0].len() - 3].to_vec();
    let (released, error) = deliver(receiver, cut, true).await;
    assert!(released.is_empty());
    assert_eq!(error, ChannelError::Truncated);
    // the stream ends cleanly between records but without a close record
    let (records, receiver) = capture(&[b"one"]).await;
    let (released, error) = deliver(receiver, records[0].clone(), true).await;
    assert_eq!(released, vec![b"one".to_vec()]);
    assert_eq!(error, ChannelError::Truncated);
}

#[tokio::test]
async fn oversized_lengths_are_refused_before_allocation() {
    let (_, receiver) = capture(&[]).await;
    let mut header = u32::MAX.to_be_bytes().to_vec();
    header.push(2); // a CONTINUE record claiming 4 GiB
    let (released, error) = deliver(receiver, header, false).await;
    assert!(released.is_empty());
    assert!(matches!(error, ChannelError::RecordTooLarge { .. }), "{error:?}");
    // a message announced beyond the maximum
    let (mut client, mut server) = configs(Pattern::NN);
    server.max_message = 1024;
    client.max_message = 1 << 20;
    let (mut c, mut s) = pair(&client, &server).await.unwrap();
    c.send(&Frame::bytes(&[0u8; 4096])).await.unwrap();
    let error = s.recv().await.unwrap_err();
    assert_eq!(error, ChannelError::MessageTooLarge { len: 4096, max: 1024 });
    // and the sender refuses to send one past its own maximum
    let error = s.send(&Frame::bytes(&[0u8; 4096])).await.unwrap_err();
    assert!(matches!(
        error,
        ChannelError::Closed | ChannelError::MessageTooLarge { .. }
    ));
}

/// A provider that returns evidence made for something else.
struct Replaying(Evidence);

impl AttestationProvider for Replaying {
    fn attest(&self, _report_data: &[u8; REPORT_DATA_LEN]) -> Result<Evidence, ChannelError> {
        Ok(self.0.clone())
    }
}

async fn handshake_error(client: &Config, server: &Config) -> ChannelError {
    let (c, s) = handshake(client, server, 1 << 16).await;
    drop(s);
    c.err().expect("the client must refuse")
}

#[tokio::test]
async fn evidence_from_another_handshake_is_rejected() {
    let (client, server) = configs(Pattern::NN);
    let provider = MockProvider::new("mock-snp", MEASUREMENT);
    // evidence that was bound to an earlier session's handshake hash
    let earlier = provider.attest(&binding(&[0x42; 32], None)).unwrap();
    let mut replaying = server.clone();
    replaying.provider = Some(Arc::new(Replaying(earlier)));
    let error = handshake_error(&client, &replaying).await;
    assert_eq!(error, ChannelError::Attestation(RejectReason::WrongBinding));
    let _ = server;
}

#[tokio::test]
async fn evidence_for_another_static_key_is_rejected() {
    let (client, server) = configs(Pattern::XX);
    let (c, _s) = pair(&client, &server).await.unwrap();
    let hash = c.handshake_hash().to_vec();
    let real = server.static_key.as_ref().unwrap().public.clone();
    let other = StaticKey::generate(server.cipher).unwrap().public;
    let provider = MockProvider::new("mock-snp", MEASUREMENT);
    // evidence for this very handshake, but bound to another static key
    let lifted = provider.attest(&binding(&hash, Some(&other))).unwrap();
    assert_eq!(
        policy(&provider).verify(&lifted, &binding(&hash, Some(&real))),
        Err(RejectReason::WrongBinding)
    );
    let honest = provider.attest(&binding(&hash, Some(&real))).unwrap();
    assert!(policy(&provider).verify(&honest, &binding(&hash, Some(&real))).is_ok());
    // and through a handshake: a server that presents evidence bound to another key is refused
    let mut server_lifted = server.clone();
    server_lifted.provider = Some(Arc::new(Replaying(lifted)));
    let error = handshake_error(&client, &server_lifted).await;
    assert_eq!(error, ChannelError::Attestation(RejectReason::WrongBinding));
}

#[tokio::test]
async fn wrong_technology_measurement_age_or_missing_evidence() {
    let (client, server) = configs(Pattern::NN);
    let mut tdx = server.clone();
    tdx.provider = Some(Arc::new(MockProvider::new("mock-tdx", MEASUREMENT)));
    assert!(matches!(
        handshake_error(&client, &tdx).await,
        ChannelError::Attestation(RejectReason::WrongTechnology { .. })
    ));
    let mut other_image = server.clone();
    other_image.provider = Some(Arc::new(MockProvider::new("mock-snp", "another image")));
    assert!(matches!(
        handshake_error(&client, &other_image).await,
        ChannelError::Attestation(RejectReason::WrongMeasurement { .. })
    ));
    let mut silent = server.clone();
    silent.provider = None;
    let (a, b) = duplex(1 << 16);
    let (c, s) = tokio::join!(connect(a, &client), async {
        let mut s = accept(b, &silent).await.unwrap();
        s.send(&Frame::bytes(b"data before evidence")).await.unwrap();
        s
    });
    drop(s);
    assert_eq!(
        c.err().unwrap(),
        ChannelError::Attestation(RejectReason::MissingEvidence)
    );
    // evidence older than the policy allows
    let provider = MockProvider::new("mock-snp", MEASUREMENT);
    let mut evidence = provider.attest(&[0u8; 64]).unwrap();
    evidence.issued_at_unix -= 3600;
    let expected = [0u8; 64];
    assert!(matches!(
        policy(&provider).verify(&evidence, &expected),
        Err(RejectReason::Expired { .. })
    ));
    // garbage instead of a report
    evidence.raw = "00".into();
    assert!(matches!(
        policy(&provider).verify(&evidence, &expected),
        Err(RejectReason::Malformed(_))
    ));
}

#[tokio::test]
async fn mutual_attestation() {
    let (mut client, mut server) = configs(Pattern::XX);
    let client_provider = MockProvider::new("mock-snp", "client image");
    client.provider = Some(Arc::new(client_provider.clone()));
    server.verify_peer = Some(policy(&client_provider));
    let (c, s) = pair(&client, &server).await.unwrap();
    assert!(c.peer_claims().is_some() && s.peer_claims().is_some());
    let mut strict_server = server.clone();
    strict_server.verify_peer = Some(Policy {
        technologies: vec!["tdx".into()],
        measurement: None,
        max_age: Duration::from_secs(60),
    });
    let (_c, s) = handshake(&client, &strict_server, 1 << 16).await;
    assert!(matches!(
        s.err().unwrap(),
        ChannelError::Attestation(RejectReason::WrongTechnology { .. })
    ));
}

/// The two ends of a channel keyed directly (no handshake), for tests that write records by hand:
/// what one sends with its keys, the other opens with the mirrored ones.
fn keyed_sender<S: AsyncRead + AsyncWrite + Unpin>(stream: S) -> Channel<S> {
    ccchannel::testing::channel_with_keys(stream, [1; 32], [2; 32], 1 << 20)
}

fn keyed_receiver<S: AsyncRead + AsyncWrite + Unpin>(stream: S) -> Channel<S> {
    ccchannel::testing::channel_with_keys(stream, [2; 32], [1; 32], 1 << 20)
}

/// A deterministic fuzz smoke test on stable Rust: random and mutated record streams must give
/// errors, never panics or released garbage. (`scripts/fuzz-transport.sh` runs the libFuzzer target.)
#[tokio::test]
async fn random_and_mutated_record_streams_never_panic() {
    let mut state = 0x9E3779B97F4A7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // a valid stream to mutate
    let (writer, mut tap) = duplex(1 << 20);
    let mut sender = keyed_sender(writer);
    sender.send(&Frame::bytes(&[9u8; 3000])).await.unwrap();
    sender
        .send(&Frame::tensor(DType::F32, &[2, 3], &[0u8; 24]).unwrap())
        .await
        .unwrap();
    sender.close().await.unwrap();
    drop(sender);
    let mut valid = Vec::new();
    tap.read_to_end(&mut valid).await.unwrap();
    for round in 0..3000 {
        let mut input = if round % 2 == 0 {
            let mut mutated = valid.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % mutated.len();
                mutated[at] = next() as u8;
            }
            if next() % 5 == 0 {
                mutated.truncate((next() as usize) % mutated.len());
            }
            mutated
        } else {
            (0..(next() % 300) as usize).map(|_| next() as u8).collect()
        };
        if round % 7 == 0 {
            input.extend_from_slice(&(0..8).map(|_| next() as u8).collect::<Vec<_>>());
        }
        let (mut feed, stream) = duplex(1 << 20);
        feed.write_all(&input).await.unwrap();
        drop(feed);
        let mut receiver = keyed_receiver(stream);
        let mut frames = 0;
        loop {
            match receiver.recv().await {
                Ok(Some(_)) => frames += 1,
                Ok(None) | Err(_) => break,
            }
            assert!(frames <= 2, "more messages than were sent");
        }
    }
}

/// A record to seal as it is: type, START's extra header (or nothing), body.
type RawRecord = (RecordType, Vec<u8>, Vec<u8>);

/// What a receiver says about well-authenticated records that break the protocol's rules.
async fn violation(records: &[RawRecord]) -> ChannelError {
    let (a, b) = duplex(1 << 20);
    let mut sender = keyed_sender(a);
    let mut receiver = keyed_receiver(b);
    for (kind, extra, body) in records {
        sender.send_raw_record_for_tests(*kind, extra, body).await.unwrap();
    }
    // no close record and the stream ends: a receiver waiting for more sees truncation, never hangs
    drop(sender);
    let error = receiver.recv().await.expect_err("the receiver must refuse");
    assert_eq!(receiver.recv().await.unwrap_err(), ChannelError::Closed);
    error
}

/// START's extra header: frame kind, then the announced total length.
fn start(kind: u8, total: u64) -> Vec<u8> {
    let mut extra = vec![kind];
    extra.extend_from_slice(&total.to_be_bytes());
    extra
}

#[tokio::test]
async fn protocol_violations_are_typed() {
    use ProtocolViolation as V;
    use RecordType as R;
    let none = Vec::new;
    let cases: Vec<(Vec<RawRecord>, ProtocolViolation)> = vec![
        (vec![(R::Attest, none(), b"{}".to_vec())], V::AttestationAfterHandshake),
        (
            vec![(R::Continue, none(), b"chunk".to_vec())],
            V::ContinuationWithoutStart,
        ),
        (
            vec![(R::Close, none(), b"body".to_vec())],
            V::ControlRecordWithBody { record: R::Close },
        ),
        (
            vec![(R::Rekey, none(), b"body".to_vec())],
            V::ControlRecordWithBody { record: R::Rekey },
        ),
        (
            vec![
                (R::Start, start(0, 10), b"abc".to_vec()),
                (R::Rekey, none(), b"body".to_vec()),
            ],
            V::ControlRecordWithBody { record: R::Rekey },
        ),
        (
            vec![
                (R::Start, start(0, 10), b"abc".to_vec()),
                (R::Attest, none(), b"{}".to_vec()),
            ],
            V::UnexpectedRecordInMessage { record: R::Attest },
        ),
        (
            vec![
                (R::Start, start(0, 10), b"abc".to_vec()),
                (R::Start, start(0, 3), b"abc".to_vec()),
            ],
            V::UnexpectedRecordInMessage { record: R::Start },
        ),
        (
            vec![(R::Start, start(0, 3), b"abcde".to_vec())],
            V::MessageLongerThanAnnounced {
                announced: 3,
                received: 5,
            },
        ),
        (vec![(R::Start, start(7, 3), b"abc".to_vec())], V::UnknownFrameKind(7)),
        (vec![(R::Start, start(1, 2), vec![99, 0])], V::UnknownDType(99)),
        (
            vec![(R::Start, start(1, 2 + 9 * 8), [vec![0, 9], vec![0; 72]].concat())],
            V::TooManyDimensions(9),
        ),
        (vec![(R::Start, start(1, 3), vec![0, 1, 0])], V::MalformedTensorHeader),
        (
            // an f32 tensor of shape [2] needs 8 bytes of data; 4 arrive
            vec![
                (
                    R::Start,
                    start(1, 14),
                    [vec![0, 1], 2u64.to_be_bytes().to_vec()].concat(),
                ),
                (R::Continue, none(), vec![0; 4]),
            ],
            V::TensorSizeMismatch { len: 4, shape: vec![2] },
        ),
    ];
    for (records, expected) in cases {
        assert_eq!(
            violation(&records).await,
            ChannelError::Protocol(expected.clone()),
            "{expected:?}"
        );
    }
    // a type byte that names no record type is a corrupted (authenticated) header
    assert_eq!(RecordType::try_from(9), Err(ccchannel::record::UnknownRecordType(9)));
    assert_eq!(RecordType::try_from(3), Ok(RecordType::Attest));
}

/// Real SEV-SNP evidence (AMD Milan report and VCEK from the `sev` crate's test data, see
/// tests/data/attestation/README.md) goes through ccverify: its own report data verifies, any other
/// binding is refused, a flipped bit breaks AMD's signature, and a report without its VCEK is refused.
#[test]
fn real_snp_evidence_is_checked_against_amds_chain() {
    use ccchannel::VendorCheck;
    let dir = manifest_dir().join("../../tests/data/attestation");
    let report = hex::decode(std::fs::read_to_string(dir.join("report_milan.hex")).unwrap().trim()).unwrap();
    let vcek = std::fs::read(dir.join("vcek_milan.der")).unwrap();
    let mut bound = [0u8; REPORT_DATA_LEN];
    bound.copy_from_slice(&report[0x50..0x90]);
    let evidence = |raw: &[u8]| Evidence {
        format: "sev-snp".into(),
        provider: "sev_guest".into(),
        raw: hex::encode(raw),
        issued_at_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        aux: String::new(),
    };
    let policy = Policy {
        technologies: vec!["sev-snp".into()],
        measurement: None,
        max_age: Duration::from_secs(60),
    };
    let vendor = VendorCheck {
        vcek: Some(vcek),
        ..VendorCheck::default()
    };
    let claims = policy.verify_with(&evidence(&report), &bound, &vendor).unwrap();
    assert_eq!(claims.technology, "sev-snp");
    // no AMD CRL was given: the peer's claims say so rather than imply a check
    let revocation = claims
        .revocation
        .expect("vendor-verified evidence says whether revocation was checked");
    assert!(
        !revocation.checked && revocation.detail.contains("not checked"),
        "{revocation:?}"
    );
    assert_eq!(
        policy.verify_with(&evidence(&report), &[0u8; REPORT_DATA_LEN], &vendor),
        Err(RejectReason::WrongBinding)
    );
    let mut tampered = report.clone();
    tampered[0x90] ^= 1;
    assert!(matches!(
        policy.verify_with(&evidence(&tampered), &bound, &vendor),
        Err(RejectReason::Vendor(ccverify::Rejection::BadSignature { .. }))
    ));
    assert_eq!(
        policy.verify(&evidence(&report), &bound),
        Err(RejectReason::Vendor(ccverify::Rejection::MissingCertificate))
    );
}

/// The sizes at and around a record's largest chunk (`MAX_CHUNK`), where a message goes from one
/// record to two and from two to three, plus the empty and one-byte messages.
fn sizes_around_the_record_boundary() -> Vec<usize> {
    let chunk = ccchannel::record::MAX_CHUNK;
    vec![
        0,
        1,
        chunk - 1,
        chunk,
        chunk + 1,
        2 * chunk - 1,
        2 * chunk,
        2 * chunk + 1,
    ]
}

fn pattern_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

#[tokio::test]
async fn messages_at_and_around_the_record_boundary_arrive_whole_in_a_reused_buffer() {
    let chunk = ccchannel::record::MAX_CHUNK;
    for pipe in [1 << 20, 4096, 7] {
        // a small pipe hands each record over in many short reads: the receiver fills its buffer's
        // spare capacity piece by piece; the largest pipe hands whole records over
        let (a, b) = duplex(pipe);
        let (mut sender, mut receiver) = (keyed_sender(a), keyed_receiver(b));
        let sizes = sizes_around_the_record_boundary();
        let sent = async {
            for &len in &sizes {
                sender.send(&Frame::bytes(&pattern_of(len))).await.unwrap();
            }
            sender.close().await.unwrap();
        };
        let received = async {
            // one buffer for every message, starting with stale bytes and more capacity than needed:
            // each message must replace, not extend, what was there
            let mut buffer = vec![0xEEu8; 3 * chunk];
            for &len in &sizes {
                assert_eq!(
                    receiver.recv_into(&mut buffer).await.unwrap(),
                    Some(ccchannel::wire::KIND_BYTES)
                );
                assert_eq!(buffer.len(), len, "pipe {pipe}, message of {len} bytes");
                assert!(
                    buffer == pattern_of(len),
                    "pipe {pipe}, message of {len} bytes: contents differ"
                );
            }
            assert_eq!(receiver.recv_into(&mut buffer).await.unwrap(), None);
        };
        tokio::join!(sent, received);
    }
}

#[tokio::test]
async fn record_sizes_on_the_wire_are_unchanged() {
    // the wire format: a message of n bytes is a START record with min(n, MAX_CHUNK) bytes of body,
    // then CONTINUE records of at most MAX_CHUNK bytes; each record's ciphertext is its body plus a
    // 16-byte tag
    let chunk = ccchannel::record::MAX_CHUNK;
    for len in sizes_around_the_record_boundary() {
        let message = pattern_of(len);
        let (records, _) = capture(&[&message]).await;
        let mut expected = vec![14 + len.min(chunk) + 16];
        let mut rest = len.saturating_sub(chunk);
        while rest > 0 {
            expected.push(5 + rest.min(chunk) + 16);
            rest -= rest.min(chunk);
        }
        let lengths: Vec<usize> = records.iter().map(Vec::len).collect();
        assert_eq!(lengths, expected, "message of {len} bytes");
        assert_eq!(records[0][4], RecordType::Start as u8);
        assert!(records[1..].iter().all(|r| r[4] == RecordType::Continue as u8));
    }
}

#[tokio::test]
async fn a_tampered_record_opened_in_place_releases_nothing_into_the_buffer() {
    // a three-record message; one bit flipped in the ciphertext or the tag of each record in turn
    let chunk = ccchannel::record::MAX_CHUNK;
    let message = pattern_of(2 * chunk + 1);
    let (records, _) = capture(&[&message]).await;
    assert_eq!(records.len(), 3);
    for (index, record) in records.iter().enumerate() {
        let header = if index == 0 { 14 } else { 5 };
        for position in [header, header + record.len() / 2 - header / 2, record.len() - 1] {
            // each tampering gets its own handshake: the records and the receiver keyed by it
            let (records, receiver) = capture(&[&message]).await;
            let mut wire = records.concat();
            let offset: usize = records[..index].iter().map(Vec::len).sum();
            wire[offset + position] ^= 0x10;
            let (mut feed, stream) = duplex(8 << 20);
            let mut receiver = receiver.replace_stream(stream);
            feed.write_all(&wire).await.unwrap();
            drop(feed);
            let mut buffer = b"what the caller had".to_vec();
            let error = receiver.recv_into(&mut buffer).await.unwrap_err();
            assert_eq!(error, ChannelError::Decrypt, "record {index}, byte {position}");
            assert!(
                buffer.is_empty(),
                "record {index}, byte {position}: {} bytes left in the caller's buffer",
                buffer.len()
            );
            assert_eq!(receiver.recv_into(&mut buffer).await.unwrap_err(), ChannelError::Closed);
        }
    }
}

#[tokio::test]
async fn a_stream_cut_inside_a_large_record_is_truncated() {
    let chunk = ccchannel::record::MAX_CHUNK;
    let message = pattern_of(chunk + 1);
    let (records, _) = capture(&[&message]).await;
    let first = records[0].len();
    let whole = records.concat().len();
    for cut in [14, 15, chunk / 2, first - 1, first + 3, whole - 1] {
        let (records, receiver) = capture(&[&message]).await;
        let wire = records.concat();
        let (released, error) = deliver(receiver, wire[..cut].to_vec(), true).await;
        assert!(released.is_empty(), "cut at {cut}");
        assert_eq!(error, ChannelError::Truncated, "cut at {cut}");
    }
}

/// What `send` and `send_in_place` write for the same messages, with the same keys: the bytes on
/// the wire, and the sender's buffers after `send_in_place` (which hold ciphertext).
async fn wire_of(messages: &[Vec<u8>], in_place: bool, rekey_after: u64) -> Vec<u8> {
    let (a, mut b) = duplex(64 << 20);
    let mut sender = ccchannel::testing::channel_with_keys(a, [1; 32], [2; 32], 1 << 22);
    sender.set_rekey_after_for_tests(rekey_after);
    for message in messages {
        if in_place {
            let mut buffer = message.clone();
            sender.send_in_place(&mut buffer).await.unwrap();
            assert!(
                buffer.is_empty() || buffer != *message,
                "the plaintext is left in the buffer"
            );
        } else {
            sender.send(&Frame::bytes(message)).await.unwrap();
        }
    }
    sender.close().await.unwrap();
    drop(sender);
    let mut wire = Vec::new();
    b.read_to_end(&mut wire).await.unwrap();
    wire
}

#[tokio::test]
async fn sending_in_place_writes_the_same_records_as_sending_a_borrowed_message() {
    let messages: Vec<Vec<u8>> = sizes_around_the_record_boundary().into_iter().map(pattern_of).collect();
    // the same keys and nonces give the same bytes: header, ciphertext and tag of every record,
    // with and without REKEY records between them
    for rekey_after in [1 << 30, 100_000] {
        let borrowed = wire_of(&messages, false, rekey_after).await;
        let in_place = wire_of(&messages, true, rekey_after).await;
        assert_eq!(borrowed.len(), in_place.len(), "rekey after {rekey_after}");
        assert!(borrowed == in_place, "rekey after {rekey_after}: the records differ");
    }
}

#[tokio::test]
async fn messages_sent_in_place_arrive_whole_over_small_pipes() {
    for pipe in [1 << 20, 4096, 7] {
        // a small pipe takes a vectored write a few bytes at a time, splitting header, body and tag
        let (a, b) = duplex(pipe);
        let (mut sender, mut receiver) = (keyed_sender(a), keyed_receiver(b));
        let sizes = sizes_around_the_record_boundary();
        let sent = async {
            let mut buffer = Vec::new();
            for &len in &sizes {
                buffer.clear();
                buffer.extend_from_slice(&pattern_of(len));
                sender.send_in_place(&mut buffer).await.unwrap();
            }
            sender.close().await.unwrap();
        };
        let received = async {
            let mut buffer = Vec::new();
            for &len in &sizes {
                receiver.recv_into(&mut buffer).await.unwrap();
                assert!(buffer == pattern_of(len), "pipe {pipe}, message of {len} bytes");
            }
            assert_eq!(receiver.recv_into(&mut buffer).await.unwrap(), None);
        };
        tokio::join!(sent, received);
    }
}

/// A stream without vectored writes (tokio's default `poll_write_vectored`: the first buffer only).
struct Unvectored(DuplexStream);

impl AsyncRead for Unvectored {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Unvectored {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_stream_without_vectored_writes_gets_the_same_messages() {
    let (a, b) = duplex(1 << 20);
    let (mut sender, mut receiver) = (keyed_sender(Unvectored(a)), keyed_receiver(b));
    let chunk = ccchannel::record::MAX_CHUNK;
    let message = pattern_of(2 * chunk + 1);
    let sent = async {
        sender.send_in_place(&mut message.clone()).await.unwrap();
        sender.close().await.unwrap();
    };
    let received = async {
        let mut buffer = Vec::new();
        receiver.recv_into(&mut buffer).await.unwrap();
        assert!(buffer == message);
        assert_eq!(receiver.recv_into(&mut buffer).await.unwrap(), None);
    };
    tokio::join!(sent, received);
}

/// The crate's directory as cargo gives it when it runs this test: the build directory is shared by
/// every checkout (scripts/cargo.sh), so the path compiled in may be another checkout's, since removed.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
