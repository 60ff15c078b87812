//! Transport benchmark: plaintext, ccchannel and TLS 1.3 (rustls) in one run on one machine.
//!
//! Measures handshake latency (per-handshake samples; mock attestation for ccchannel), request /
//! response round trip and one-way throughput for 1536 B, 4 KiB, 384 KiB and 1 MiB payloads over an
//! in-process duplex pipe and loopback TCP, and the raw AEAD seal+open speed of one core (the ceiling
//! the channel should approach). Everything runs on one thread, so both ends share a core, as the
//! AEAD ceiling does. Prints one JSON document.
//!
//! usage: ccchannel-bench [--transport all|plain|tls|securechannel] [--pipe all|duplex|tcp]
//!                        [--handshakes N] [--quick] [--sizes 1536,4096,...]
//!        ccchannel-bench interop-responder [AESGCM|ChaChaPoly]   (Noise NN responder on stdin/stdout)

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccchannel::{accept, connect, Cipher, Config, Frame, MockProvider, Pattern, Policy};
use serde_json::{json, Value};
use tokio::io::{duplex, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DEFAULT_SIZES: [usize; 4] = [1536, 4096, 384 * 1024, 1024 * 1024];
const DUPLEX_BUFFER: usize = 4 << 20;

/// The transports compared; parsed from the command line, so an unknown name is an error rather
/// than a silent fall-through to one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Plain,
    Tls,
    SecureChannel,
}

impl Transport {
    const ALL: [Transport; 3] = [Transport::Plain, Transport::Tls, Transport::SecureChannel];

    fn name(self) -> &'static str {
        match self {
            Transport::Plain => "plain",
            Transport::Tls => "tls",
            Transport::SecureChannel => "securechannel",
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Transport::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| format!("unknown transport {name}: plain, tls, securechannel or all"))
    }
}

/// What carries the bytes between the two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pipe {
    /// tokio's in-process duplex pipe: no kernel, the channel's own cost
    Duplex,
    /// loopback TCP with TCP_NODELAY
    Tcp,
}

impl Pipe {
    const ALL: [Pipe; 2] = [Pipe::Duplex, Pipe::Tcp];

    fn name(self) -> &'static str {
        match self {
            Pipe::Duplex => "duplex",
            Pipe::Tcp => "tcp",
        }
    }
}

impl std::str::FromStr for Pipe {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Pipe::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("unknown pipe {name}: duplex, tcp or all"))
    }
}

struct Options {
    transports: Vec<Transport>,
    pipes: Vec<Pipe>,
    handshakes: usize,
    quick: bool,
    sizes: Vec<usize>,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        transports: Transport::ALL.to_vec(),
        pipes: Pipe::ALL.to_vec(),
        handshakes: 1000,
        quick: false,
        sizes: DEFAULT_SIZES.to_vec(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--transport" => {
                let v = value("--transport")?;
                if v != "all" {
                    options.transports = vec![v.parse()?];
                }
            }
            "--pipe" => {
                let v = value("--pipe")?;
                if v != "all" {
                    options.pipes = vec![v.parse()?];
                }
            }
            "--handshakes" => {
                options.handshakes = value("--handshakes")?
                    .parse()
                    .map_err(|_| "--handshakes needs a number")?
            }
            "--quick" => options.quick = true,
            "--sizes" => {
                options.sizes = value("--sizes")?
                    .split(',')
                    .map(|s| s.trim().parse::<usize>().map_err(|_| format!("bad size {s}")))
                    .collect::<Result<_, _>>()?
            }
            "-h" | "--help" => {
                println!("usage: ccchannel-bench [--transport all|plain|tls|securechannel] [--pipe all|duplex|tcp] [--handshakes N] [--quick] [--sizes a,b,c]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    Ok(options)
}

// ---- statistics ------------------------------------------------------------------------------

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0) * (sorted.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

fn summary(mut samples_us: Vec<f64>) -> Value {
    samples_us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mean = samples_us.iter().sum::<f64>() / samples_us.len().max(1) as f64;
    json!({
        "n": samples_us.len(), "mean_us": mean,
        "p50_us": percentile(&samples_us, 50.0), "p95_us": percentile(&samples_us, 95.0), "p99_us": percentile(&samples_us, 99.0),
        "samples_us": samples_us,
    })
}

// ---- a message interface over the three transports -------------------------------------------------

trait Messenger {
    async fn send_message(&mut self, data: &[u8]) -> std::io::Result<()>;
    async fn recv_message(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<()>;
}

/// plaintext and TLS: u32 length prefix, then the bytes, written with one call (as the channel does)
struct Framed<S>(S, Vec<u8>);

impl<S: AsyncRead + AsyncWrite + Unpin> Messenger for Framed<S> {
    async fn send_message(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.1.clear();
        self.1.extend_from_slice(&(data.len() as u32).to_be_bytes());
        self.1.extend_from_slice(data);
        self.0.write_all(&self.1).await?;
        self.0.flush().await
    }

    async fn recv_message(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<()> {
        let mut length = [0u8; 4];
        self.0.read_exact(&mut length).await?;
        buffer.resize(u32::from_be_bytes(length) as usize, 0);
        self.0.read_exact(buffer).await?;
        Ok(())
    }
}

struct Secure<S>(ccchannel::Channel<S>);

fn io_error(error: ccchannel::ChannelError) -> std::io::Error {
    std::io::Error::other(error.to_string())
}

impl<S: AsyncRead + AsyncWrite + Unpin> Messenger for Secure<S> {
    async fn send_message(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0.send(&Frame::bytes(data)).await.map_err(io_error)
    }

    async fn recv_message(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<()> {
        match self.0.recv_into(buffer).await.map_err(io_error)? {
            Some(_) => Ok(()),
            None => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed")),
        }
    }
}

// ---- endpoints -----------------------------------------------------------------------------------

struct Tls {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

fn tls_configs() -> Tls {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("self-signed certificate");
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("server certificate");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).expect("trust the test certificate");
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Tls {
        server: Arc::new(server),
        client: Arc::new(client),
    }
}

fn channel_configs() -> (Config, Config) {
    let provider = MockProvider::new("mock-snp", "ccbench-bench-image");
    let mut server = Config::new(Pattern::NN);
    server.provider = Some(Arc::new(provider.clone()));
    let mut client = Config::new(Pattern::NN);
    client.verify_peer = Some(Policy {
        technologies: vec!["mock-snp".into()],
        measurement: Some(provider.measurement_hex()),
        max_age: Duration::from_secs(300),
    });
    (client, server)
}

/// A connected pair of raw streams.
async fn raw_pair(pipe: Pipe) -> (Box<dyn Stream>, Box<dyn Stream>) {
    if pipe == Pipe::Duplex {
        let (a, b) = duplex(DUPLEX_BUFFER);
        (Box::new(a), Box::new(b))
    } else {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let address = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(address), listener.accept());
        let client = client.expect("connect");
        let (server, _) = server.expect("accept");
        client.set_nodelay(true).ok();
        server.set_nodelay(true).ok();
        (Box::new(client), Box::new(server))
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Stream for T {}

enum Endpoint {
    Plain(Framed<Box<dyn Stream>>),
    Tls(Framed<tokio_rustls::client::TlsStream<Box<dyn Stream>>>),
    TlsServer(Framed<tokio_rustls::server::TlsStream<Box<dyn Stream>>>),
    Secure(Secure<Box<dyn Stream>>),
}

impl Endpoint {
    async fn send_message(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Endpoint::Plain(m) => m.send_message(data).await,
            Endpoint::Tls(m) => m.send_message(data).await,
            Endpoint::TlsServer(m) => m.send_message(data).await,
            Endpoint::Secure(m) => m.send_message(data).await,
        }
    }

    async fn recv_message(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<()> {
        match self {
            Endpoint::Plain(m) => m.recv_message(buffer).await,
            Endpoint::Tls(m) => m.recv_message(buffer).await,
            Endpoint::TlsServer(m) => m.recv_message(buffer).await,
            Endpoint::Secure(m) => m.recv_message(buffer).await,
        }
    }
}

/// The protocol version and cipher suite rustls negotiates between this benchmark's two TLS
/// configurations, so a TLS cost can be attributed to the suite that produced it.
async fn tls_negotiated(tls: &Tls) -> Value {
    let (a, b) = raw_pair(Pipe::Duplex).await;
    let connector = tokio_rustls::TlsConnector::from(tls.client.clone());
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let (client, server) = tokio::join!(connector.connect(name, a), acceptor.accept(b));
    let (client, _server) = (
        client.expect("TLS client handshake"),
        server.expect("TLS server handshake"),
    );
    let connection = client.get_ref().1;
    json!({
        "version": connection.protocol_version().map(|version| format!("{version:?}")),
        "suite": connection.negotiated_cipher_suite().map(|suite| format!("{:?}", suite.suite())),
    })
}

/// Connect a client and a server endpoint of `transport` over `pipe`; returns them and the handshake time.
async fn connect_pair(
    transport: Transport,
    pipe: Pipe,
    tls: &Tls,
    configs: &(Config, Config),
) -> (Endpoint, Endpoint, Duration) {
    let (a, b) = raw_pair(pipe).await;
    let start = Instant::now();
    match transport {
        Transport::Plain => (
            Endpoint::Plain(Framed(a, Vec::new())),
            Endpoint::Plain(Framed(b, Vec::new())),
            start.elapsed(),
        ),
        Transport::Tls => {
            let connector = tokio_rustls::TlsConnector::from(tls.client.clone());
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let (c, s) = tokio::join!(connector.connect(name, a), acceptor.accept(b));
            let mut c = c.expect("TLS client handshake");
            let mut s = s.expect("TLS server handshake");
            // TLS 1.3 finishes on the server when the client's Finished arrives: one byte each way
            // makes both sides complete, as the ccchannel handshake's attestation step does
            let (_, _) = tokio::join!(
                async {
                    c.write_all(b"x").await.unwrap();
                    c.flush().await.unwrap();
                },
                async {
                    let mut one = [0u8; 1];
                    s.read_exact(&mut one).await.unwrap();
                }
            );
            let elapsed = start.elapsed();
            (
                Endpoint::Tls(Framed(c, Vec::new())),
                Endpoint::TlsServer(Framed(s, Vec::new())),
                elapsed,
            )
        }
        Transport::SecureChannel => {
            let (c, s) = tokio::join!(connect(a, &configs.0), accept(b, &configs.1));
            let elapsed = start.elapsed();
            (
                Endpoint::Secure(Secure(c.expect("client handshake"))),
                Endpoint::Secure(Secure(s.expect("server handshake"))),
                elapsed,
            )
        }
    }
}

async fn bench_handshakes(
    transport: Transport,
    pipe: Pipe,
    count: usize,
    tls: &Tls,
    configs: &(Config, Config),
) -> Value {
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count.max(1) / 20 {
        connect_pair(transport, pipe, tls, configs).await; // warm-up
    }
    for _ in 0..count {
        let (_, _, elapsed) = connect_pair(transport, pipe, tls, configs).await;
        samples.push(elapsed.as_secs_f64() * 1e6);
    }
    let mut result = summary(samples);
    result["transport"] = json!(transport.name());
    result["pipe"] = json!(pipe.name());
    result
}

fn iterations(size: usize, quick: bool) -> usize {
    let n = match size {
        0..=8192 => 2000,
        8193..=500_000 => 200,
        _ => 100,
    };
    if quick {
        (n / 5).max(20)
    } else {
        n
    }
}

async fn bench_rtt(
    transport: Transport,
    pipe: Pipe,
    size: usize,
    quick: bool,
    tls: &Tls,
    configs: &(Config, Config),
) -> Value {
    let (mut client, mut server, _) = connect_pair(transport, pipe, tls, configs).await;
    let request = vec![0x5Au8; size];
    let count = iterations(size, quick);
    let mut samples = Vec::with_capacity(count);
    let mut client_buffer = Vec::with_capacity(size);
    let mut server_buffer = Vec::with_capacity(size);
    for i in 0..count + count / 10 {
        let start = Instant::now();
        let (sent, served) = tokio::join!(
            async {
                client.send_message(&request).await?;
                client.recv_message(&mut client_buffer).await
            },
            async {
                server.recv_message(&mut server_buffer).await?;
                server.send_message(&server_buffer).await
            }
        );
        sent.expect("client");
        served.expect("server");
        if i >= count / 10 {
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
        assert_eq!(client_buffer.len(), size);
    }
    let mut result = summary(samples);
    result["transport"] = json!(transport.name());
    result["pipe"] = json!(pipe.name());
    result["payload"] = json!(size);
    result
}

async fn bench_throughput(
    transport: Transport,
    pipe: Pipe,
    size: usize,
    quick: bool,
    tls: &Tls,
    configs: &(Config, Config),
) -> Value {
    let (mut client, mut server, _) = connect_pair(transport, pipe, tls, configs).await;
    let total: usize = if quick { 64 << 20 } else { 256 << 20 };
    let count = (total / size).max(20);
    let message = vec![0xA5u8; size];
    let start = Instant::now();
    let (sent, received) = tokio::join!(
        async {
            for _ in 0..count {
                client.send_message(&message).await?;
            }
            let mut ack = Vec::new();
            client.recv_message(&mut ack).await
        },
        async {
            let mut buffer = Vec::with_capacity(size);
            let mut bytes = 0usize;
            for _ in 0..count {
                server.recv_message(&mut buffer).await?;
                bytes += buffer.len();
            }
            server.send_message(b"k").await?;
            Ok::<usize, std::io::Error>(bytes)
        }
    );
    sent.expect("sender");
    let bytes = received.expect("receiver");
    let seconds = start.elapsed().as_secs_f64();
    json!({"transport": transport.name(), "pipe": pipe.name(), "payload": size, "messages": count, "bytes": bytes,
           "seconds": seconds, "MBps": bytes as f64 / seconds / 1e6})
}

/// Seal and open 1 MiB with the channel's AEAD on one core: the ceiling for the channel's throughput.
fn bench_aead(quick: bool) -> Value {
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
    json!({"cipher": format!("{cipher:?}"), "payload": 1 << 20, "rounds": rounds, "seconds": seconds,
           "seal_open_MBps": bytes as f64 / seconds / 1e6})
}

/// One X25519 key generation plus one agreement (ring), per side of an NN handshake: its floor.
fn bench_x25519(quick: bool) -> Value {
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
    let ring_side = summary(ring_samples)["p50_us"].as_f64().unwrap();
    let snow_side = summary(snow_samples)["p50_us"].as_f64().unwrap();
    // the floor: two sides, each with one key generation and one agreement, with the faster library
    let per_side = ring_side.min(snow_side);
    json!({"keygen_plus_agree_us": per_side, "ring_keygen_plus_agree_p50_us": ring_side,
           "snow_keygen_plus_agree_p50_us": snow_side, "nn_handshake_floor_us": 2.0 * per_side})
}

fn find<'a>(values: &'a [Value], transport: &str, pipe: &str, payload: Option<usize>) -> Option<&'a Value> {
    values
        .iter()
        .find(|v| v["transport"] == transport && v["pipe"] == pipe && payload.is_none_or(|p| v["payload"] == json!(p)))
}

/// The NN handshake through `snow` alone, in memory (no channel, no evidence, no I/O): with the X25519
/// floor and the full handshake it shows where the time above the floor goes.
fn bench_snow_nn(quick: bool) -> Value {
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
    summary(samples)
}

/// The cost of verifying one real piece of evidence with ccverify (the code the channel's verifier
/// uses for SEV-SNP and TDX peers): the Milan report from the `sev` crate's test data (VCEK signature
/// and the chain to AMD's pinned roots), and the TDX quote from `dcap-qvl`'s with its DCAP collateral
/// (checked at a moment inside the collateral's validity window).
fn bench_verify(quick: bool) -> Value {
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
        let value: Value = serde_json::from_str(json).expect("collateral JSON");
        value["issueDate"]
            .as_str()
            .and_then(unix_from_rfc3339)
            .expect("issueDate")
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
    json!({"snp_report": summary(snp), "tdx_quote": summary(tdx)})
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

fn targets(handshakes: &[Value], rtts: &[Value], throughputs: &[Value], aead: &Value, x25519: &Value) -> Value {
    let pipe = "duplex";
    let mut checks = serde_json::Map::new();
    if let (Some(sc), Some(ceiling)) = (
        find(throughputs, "securechannel", pipe, Some(1 << 20)),
        aead["seal_open_MBps"].as_f64(),
    ) {
        let mbps = sc["MBps"].as_f64().unwrap_or(0.0);
        checks.insert(
            "throughput_1MiB_MBps".into(),
            json!({"value": mbps, "target": ">= 2000", "met": mbps >= 2000.0}),
        );
        checks.insert(
            "throughput_1MiB_share_of_aead".into(),
            json!({"value": mbps / ceiling, "target": ">= 0.70", "met": mbps / ceiling >= 0.70}),
        );
        if let Some(tls) = find(throughputs, "tls", pipe, Some(1 << 20)) {
            let t = tls["MBps"].as_f64().unwrap_or(0.0);
            checks.insert(
                "throughput_1MiB_vs_tls".into(),
                json!({"value": mbps / t, "target": "> 1", "met": mbps > t}),
            );
        }
    }
    for rtt_pipe in ["duplex", "tcp"] {
        if let (Some(sc), Some(plain)) = (
            find(rtts, "securechannel", rtt_pipe, Some(1536)),
            find(rtts, "plain", rtt_pipe, Some(1536)),
        ) {
            let ratio = sc["p50_us"].as_f64().unwrap() / plain["p50_us"].as_f64().unwrap();
            checks.insert(
                format!("rtt_1536_vs_plain_{rtt_pipe}"),
                json!({"value": ratio, "target": "<= 1.15", "met": ratio <= 1.15}),
            );
            if let Some(tls) = find(rtts, "tls", rtt_pipe, Some(1536)) {
                let t = sc["p50_us"].as_f64().unwrap() / tls["p50_us"].as_f64().unwrap();
                checks.insert(
                    format!("rtt_1536_vs_tls_{rtt_pipe}"),
                    json!({"value": t, "target": "< 1", "met": t < 1.0}),
                );
            }
        }
    }
    if let Some(sc) = find(handshakes, "securechannel", pipe, None) {
        let p50 = sc["p50_us"].as_f64().unwrap();
        if let Some(floor) = x25519["nn_handshake_floor_us"].as_f64() {
            let ratio = p50 / floor;
            checks.insert(
                "handshake_vs_x25519_floor".into(),
                json!({"value": ratio, "target": "<= 1.2", "met": ratio <= 1.2}),
            );
        }
        checks.insert(
            "handshake_p50_us".into(),
            json!({"value": p50, "target": "<= 100", "met": p50 <= 100.0}),
        );
        if let Some(tls) = find(handshakes, "tls", pipe, None) {
            let t = p50 / tls["p50_us"].as_f64().unwrap();
            checks.insert(
                "handshake_vs_tls".into(),
                json!({"value": t, "target": "< 1", "met": t < 1.0}),
            );
        }
    }
    Value::Object(checks)
}

/// A Noise NN responder on stdin/stdout for interoperability tests with another Noise implementation:
/// reads `u16 length || message 1`, writes `u16 length || message 2`, then writes one transport
/// message ("interop ok" encrypted with the responder's sending key) and the handshake hash (hex) on stderr.
fn interop_responder(cipher: &str) -> Result<(), String> {
    let name = format!("Noise_NN_25519_{cipher}_SHA256");
    let params = name.parse().map_err(|e: snow::Error| e.to_string())?;
    let mut responder = snow::Builder::new(params)
        .build_responder()
        .map_err(|e| e.to_string())?;
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut length = [0u8; 2];
    stdin.read_exact(&mut length).map_err(|e| e.to_string())?;
    let mut message = vec![0u8; u16::from_be_bytes(length) as usize];
    stdin.read_exact(&mut message).map_err(|e| e.to_string())?;
    let mut payload = [0u8; 1024];
    responder
        .read_message(&message, &mut payload)
        .map_err(|e| e.to_string())?;
    let mut out = [0u8; 1024];
    let n = responder.write_message(b"", &mut out).map_err(|e| e.to_string())?;
    stdout
        .write_all(&(n as u16).to_be_bytes())
        .and_then(|_| stdout.write_all(&out[..n]))
        .map_err(|e| e.to_string())?;
    let hash = hex::encode(responder.get_handshake_hash());
    let mut transport = responder.into_transport_mode().map_err(|e| e.to_string())?;
    let n = transport
        .write_message(b"interop ok", &mut out)
        .map_err(|e| e.to_string())?;
    stdout
        .write_all(&(n as u16).to_be_bytes())
        .and_then(|_| stdout.write_all(&out[..n]))
        .map_err(|e| e.to_string())?;
    stdout.flush().map_err(|e| e.to_string())?;
    eprintln!("{hash}");
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("interop-responder") {
        let cipher = args.next().unwrap_or_else(|| "AESGCM".into());
        if let Err(error) = interop_responder(&cipher) {
            eprintln!("ccchannel-bench: interop: {error}");
            std::process::exit(1);
        }
        return;
    }
    let options = match parse_args() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("ccchannel-bench: {error}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let document = runtime.block_on(async {
        let tls = tls_configs();
        let configs = channel_configs();
        let mut handshakes = Vec::new();
        let mut rtts = Vec::new();
        let mut throughputs = Vec::new();
        for &pipe in &options.pipes {
            for &transport in &options.transports {
                if transport != Transport::Plain {
                    handshakes.push(bench_handshakes(transport, pipe, options.handshakes, &tls, &configs).await);
                }
                for &size in &options.sizes {
                    rtts.push(bench_rtt(transport, pipe, size, options.quick, &tls, &configs).await);
                    throughputs.push(bench_throughput(transport, pipe, size, options.quick, &tls, &configs).await);
                }
            }
        }
        let aead = bench_aead(options.quick);
        let x25519 = bench_x25519(options.quick);
        let checks = targets(&handshakes, &rtts, &throughputs, &aead, &x25519);
        let snow_nn = bench_snow_nn(options.quick);
        let negotiated = if options.transports.contains(&Transport::Tls) {
            tls_negotiated(&tls).await
        } else {
            Value::Null
        };
        let verify = if options.transports.contains(&Transport::SecureChannel) {
            bench_verify(options.quick)
        } else {
            Value::Null
        };
        json!({
            "tool": "ccchannel-bench", "version": env!("CARGO_PKG_VERSION"),
            "cipher": format!("{:?}", Cipher::for_this_cpu()),
            "handshake": handshakes, "rtt": rtts, "throughput": throughputs, "aead": aead, "x25519": x25519, "targets": checks,
            "snow_nn_handshake": snow_nn, "verify": verify, "tls": negotiated,
        })
    });
    println!("{}", serde_json::to_string(&document).expect("JSON"));
}
