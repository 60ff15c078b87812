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

struct Options {
    transports: Vec<String>,
    pipes: Vec<String>,
    handshakes: usize,
    quick: bool,
    sizes: Vec<usize>,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        transports: vec!["plain".into(), "tls".into(), "securechannel".into()],
        pipes: vec!["duplex".into(), "tcp".into()],
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
                    if !["plain", "tls", "securechannel"].contains(&v.as_str()) {
                        return Err(format!("unknown transport {v}: plain, tls, securechannel or all"));
                    }
                    options.transports = vec![v];
                }
            }
            "--pipe" => {
                let v = value("--pipe")?;
                if v != "all" {
                    if !["duplex", "tcp"].contains(&v.as_str()) {
                        return Err(format!("unknown pipe {v}: duplex, tcp or all"));
                    }
                    options.pipes = vec![v];
                }
            }
            "--handshakes" => {
                options.handshakes = value("--handshakes")?.parse().map_err(|_| "--handshakes needs a number")?
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
    std::io::Error::new(std::io::ErrorKind::Other, error.to_string())
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
    Tls { server: Arc::new(server), client: Arc::new(client) }
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
async fn raw_pair(pipe: &str) -> (Box<dyn Stream>, Box<dyn Stream>) {
    if pipe == "duplex" {
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

/// Connect a client and a server endpoint of `transport` over `pipe`; returns them and the handshake time.
async fn connect_pair(transport: &str, pipe: &str, tls: &Tls, configs: &(Config, Config)) -> (Endpoint, Endpoint, Duration) {
    let (a, b) = raw_pair(pipe).await;
    let start = Instant::now();
    match transport {
        "plain" => (Endpoint::Plain(Framed(a, Vec::new())), Endpoint::Plain(Framed(b, Vec::new())), start.elapsed()),
        "tls" => {
            let connector = tokio_rustls::TlsConnector::from(tls.client.clone());
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let (c, s) = tokio::join!(connector.connect(name, a), acceptor.accept(b));
            let mut c = c.expect("TLS client handshake");
            let mut s = s.expect("TLS server handshake");
            // TLS 1.3 finishes on the server when the client's Finished arrives: one byte each way
            // makes both sides complete, as the ccchannel handshake's attestation step does
            let (_, _) = tokio::join!(async { c.write_all(b"x").await.unwrap(); c.flush().await.unwrap(); },
                                      async { let mut one = [0u8; 1]; s.read_exact(&mut one).await.unwrap(); });
            let elapsed = start.elapsed();
            (Endpoint::Tls(Framed(c, Vec::new())), Endpoint::TlsServer(Framed(s, Vec::new())), elapsed)
        }
        _ => {
            let (c, s) = tokio::join!(connect(a, &configs.0), accept(b, &configs.1));
            let elapsed = start.elapsed();
            (Endpoint::Secure(Secure(c.expect("client handshake"))), Endpoint::Secure(Secure(s.expect("server handshake"))), elapsed)
        }
    }
}

async fn bench_handshakes(transport: &str, pipe: &str, count: usize, tls: &Tls, configs: &(Config, Config)) -> Value {
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count.max(1) / 20 {
        connect_pair(transport, pipe, tls, configs).await; // warm-up
    }
    for _ in 0..count {
        let (_, _, elapsed) = connect_pair(transport, pipe, tls, configs).await;
        samples.push(elapsed.as_secs_f64() * 1e6);
    }
    let mut result = summary(samples);
    result["transport"] = json!(transport);
    result["pipe"] = json!(pipe);
    result
}

fn iterations(size: usize, quick: bool) -> usize {
    let n = match size {
        0..=8192 => 2000,
        8193..=500_000 => 200,
        _ => 100,
    };
    if quick { (n / 5).max(20) } else { n }
}

async fn bench_rtt(transport: &str, pipe: &str, size: usize, quick: bool, tls: &Tls, configs: &(Config, Config)) -> Value {
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
    result["transport"] = json!(transport);
    result["pipe"] = json!(pipe);
    result["payload"] = json!(size);
    result
}

async fn bench_throughput(transport: &str, pipe: &str, size: usize, quick: bool, tls: &Tls, configs: &(Config, Config)) -> Value {
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
    json!({"transport": transport, "pipe": pipe, "payload": size, "messages": count, "bytes": bytes,
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
        let tag = key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buffer).unwrap();
        let mut sealed = std::mem::take(&mut buffer);
        sealed.extend_from_slice(tag.as_ref());
        let plain_len = key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed).unwrap().len();
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
    let rng = ring::rand::SystemRandom::new();
    let peer = EphemeralPrivateKey::generate(&X25519, &rng).unwrap().compute_public_key().unwrap();
    let rounds = if quick { 500 } else { 3000 };
    let start = Instant::now();
    for _ in 0..rounds {
        let private = EphemeralPrivateKey::generate(&X25519, &rng).unwrap();
        let _public = private.compute_public_key().unwrap();
        agree_ephemeral(private, &UnparsedPublicKey::new(&X25519, peer.as_ref()), |secret| secret[0]).unwrap();
    }
    let per_side = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    json!({"keygen_plus_agree_us": per_side, "nn_handshake_floor_us": 2.0 * per_side})
}

fn find<'a>(values: &'a [Value], transport: &str, pipe: &str, payload: Option<usize>) -> Option<&'a Value> {
    values.iter().find(|v| {
        v["transport"] == transport && v["pipe"] == pipe && payload.map_or(true, |p| v["payload"] == json!(p))
    })
}

fn targets(handshakes: &[Value], rtts: &[Value], throughputs: &[Value], aead: &Value) -> Value {
    let pipe = "duplex";
    let mut checks = serde_json::Map::new();
    if let (Some(sc), Some(ceiling)) = (find(throughputs, "securechannel", pipe, Some(1 << 20)), aead["seal_open_MBps"].as_f64()) {
        let mbps = sc["MBps"].as_f64().unwrap_or(0.0);
        checks.insert("throughput_1MiB_MBps".into(), json!({"value": mbps, "target": ">= 2000", "met": mbps >= 2000.0}));
        checks.insert("throughput_1MiB_share_of_aead".into(),
                      json!({"value": mbps / ceiling, "target": ">= 0.70", "met": mbps / ceiling >= 0.70}));
        if let Some(tls) = find(throughputs, "tls", pipe, Some(1 << 20)) {
            let t = tls["MBps"].as_f64().unwrap_or(0.0);
            checks.insert("throughput_1MiB_vs_tls".into(), json!({"value": mbps / t, "target": "> 1", "met": mbps > t}));
        }
    }
    for rtt_pipe in ["duplex", "tcp"] {
        if let (Some(sc), Some(plain)) = (find(rtts, "securechannel", rtt_pipe, Some(1536)), find(rtts, "plain", rtt_pipe, Some(1536))) {
            let ratio = sc["p50_us"].as_f64().unwrap() / plain["p50_us"].as_f64().unwrap();
            checks.insert(format!("rtt_1536_vs_plain_{rtt_pipe}"), json!({"value": ratio, "target": "<= 1.15", "met": ratio <= 1.15}));
            if let Some(tls) = find(rtts, "tls", rtt_pipe, Some(1536)) {
                let t = sc["p50_us"].as_f64().unwrap() / tls["p50_us"].as_f64().unwrap();
                checks.insert(format!("rtt_1536_vs_tls_{rtt_pipe}"), json!({"value": t, "target": "< 1", "met": t < 1.0}));
            }
        }
    }
    if let Some(sc) = find(handshakes, "securechannel", pipe, None) {
        let p50 = sc["p50_us"].as_f64().unwrap();
        checks.insert("handshake_p50_us".into(), json!({"value": p50, "target": "<= 100", "met": p50 <= 100.0}));
        if let Some(tls) = find(handshakes, "tls", pipe, None) {
            let t = p50 / tls["p50_us"].as_f64().unwrap();
            checks.insert("handshake_vs_tls".into(), json!({"value": t, "target": "< 1", "met": t < 1.0}));
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
    let mut responder = snow::Builder::new(params).build_responder().map_err(|e| e.to_string())?;
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut length = [0u8; 2];
    stdin.read_exact(&mut length).map_err(|e| e.to_string())?;
    let mut message = vec![0u8; u16::from_be_bytes(length) as usize];
    stdin.read_exact(&mut message).map_err(|e| e.to_string())?;
    let mut payload = [0u8; 1024];
    responder.read_message(&message, &mut payload).map_err(|e| e.to_string())?;
    let mut out = [0u8; 1024];
    let n = responder.write_message(b"", &mut out).map_err(|e| e.to_string())?;
    stdout.write_all(&(n as u16).to_be_bytes()).and_then(|_| stdout.write_all(&out[..n])).map_err(|e| e.to_string())?;
    let hash = hex::encode(responder.get_handshake_hash());
    let mut transport = responder.into_transport_mode().map_err(|e| e.to_string())?;
    let n = transport.write_message(b"interop ok", &mut out).map_err(|e| e.to_string())?;
    stdout.write_all(&(n as u16).to_be_bytes()).and_then(|_| stdout.write_all(&out[..n])).map_err(|e| e.to_string())?;
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
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let document = runtime.block_on(async {
        let tls = tls_configs();
        let configs = channel_configs();
        let mut handshakes = Vec::new();
        let mut rtts = Vec::new();
        let mut throughputs = Vec::new();
        for pipe in &options.pipes {
            for transport in &options.transports {
                if transport != "plain" {
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
        let checks = targets(&handshakes, &rtts, &throughputs, &aead);
        json!({
            "tool": "ccchannel-bench", "version": env!("CARGO_PKG_VERSION"),
            "cipher": format!("{:?}", Cipher::for_this_cpu()),
            "handshake": handshakes, "rtt": rtts, "throughput": throughputs, "aead": aead, "x25519": x25519, "targets": checks,
        })
    });
    println!("{}", serde_json::to_string(&document).expect("JSON"));
}
