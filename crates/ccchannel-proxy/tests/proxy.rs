//! The proxy end to end in one process: an echo service behind a server proxy, applications
//! connecting through a client proxy, over real loopback TCP.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ccchannel::Policy;
use ccchannel_proxy::{client, server, EvidenceSource, ProxySettings, Stats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A proxy that presents mock evidence of the technology `own` and accepts only `accept`.
fn settings((own, accept): (&str, &str)) -> ProxySettings {
    ProxySettings {
        evidence: EvidenceSource::Mock {
            technology: own.into(),
            measurement_label: "ccbench-test-image".into(),
        },
        policy: Policy {
            technologies: vec![accept.into()],
            measurement: None,
            max_age: Duration::from_secs(60),
        },
    }
}

/// What `socket` receives until it is closed (within 30 s), and whether it closed cleanly (false:
/// reset); what arrived before a reset is kept.
async fn until_closed(socket: &mut TcpStream) -> (bool, Vec<u8>) {
    let mut back = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), socket.read_to_end(&mut back))
        .await
        .expect("the connection was left open for 30 s");
    (read.is_ok(), back)
}

/// Waits until `counter` reaches `value`: a proxy counts a refusal in its own task, which may run
/// after the application connection has already closed. Panics after 60 s (a count that never
/// comes), never because the machine was slow.
async fn reaches(counter: &std::sync::atomic::AtomicU64, value: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while counter.load(Ordering::SeqCst) < value {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the count stayed at {} (expected {value})",
            counter.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A service that echoes every byte back; returns its address and how many connections it saw.
async fn echo_service() -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut reader, mut writer) = socket.split();
                let _ = tokio::io::copy(&mut reader, &mut writer).await;
            });
        }
    });
    (address, seen, task)
}

struct Pair {
    client_address: SocketAddr,
    client_stats: Arc<Stats>,
    server_stats: Arc<Stats>,
    server_task: JoinHandle<()>,
    _client_task: JoinHandle<()>,
}

async fn proxies(target: SocketAddr, client_settings: ProxySettings, server_settings: ProxySettings) -> Pair {
    let server_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_address = server_listener.local_addr().unwrap();
    let server_stats = Arc::new(Stats::default());
    let server_task = tokio::spawn(server(server_listener, target, server_settings, server_stats.clone()));
    let client_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client_address = client_listener.local_addr().unwrap();
    let client_stats = Arc::new(Stats::default());
    let client_task = tokio::spawn(client(
        client_listener,
        server_address,
        client_settings,
        client_stats.clone(),
    ));
    Pair {
        client_address,
        client_stats,
        server_stats,
        server_task,
        _client_task: client_task,
    }
}

/// What most tests stand on: an echo service behind a server proxy, a client proxy in front of
/// that, each proxy's evidence as [`settings`] takes it; and the service's connection count.
struct EchoThroughProxies {
    pair: Pair,
    seen: Arc<std::sync::atomic::AtomicU64>,
    service: JoinHandle<()>,
}

async fn echo_through_proxies(client_side: (&str, &str), server_side: (&str, &str)) -> EchoThroughProxies {
    let (target, seen, service) = echo_service().await;
    let pair = proxies(target, settings(client_side), settings(server_side)).await;
    EchoThroughProxies { pair, seen, service }
}

/// Both ends present mock TDX evidence and accept only that.
const TDX: (&str, &str) = ("mock-tdx", "mock-tdx");

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 31 + seed * 7) % 251) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_connections_each_get_their_own_bytes_back() {
    let EchoThroughProxies {
        pair,
        seen,
        service: _service,
    } = echo_through_proxies(TDX, TDX).await;
    let mut clients = Vec::new();
    for n in 0..40usize {
        let address = pair.client_address;
        clients.push(tokio::spawn(async move {
            let mut socket = TcpStream::connect(address).await.unwrap();
            // larger than one relay chunk and one channel record, written while the echo flows back
            let data = pattern(n, 300_000 + n * 1000);
            let (mut reader, mut writer) = socket.split();
            let expected = data.clone();
            let write = async move {
                writer.write_all(&data).await.unwrap();
                writer.shutdown().await.unwrap();
            };
            let read = async move {
                let mut back = Vec::new();
                reader.read_to_end(&mut back).await.unwrap();
                back
            };
            let (_, back) = tokio::join!(write, read);
            assert_eq!(back.len(), expected.len(), "connection {n}: length");
            assert!(back == expected, "connection {n}: bytes differ");
        }));
    }
    for c in clients {
        tokio::time::timeout(Duration::from_secs(120), c)
            .await
            .expect("a connection hung")
            .unwrap();
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        40,
        "one service connection per application connection"
    );
    assert_eq!(pair.client_stats.accepted.load(Ordering::SeqCst), 40);
    assert_eq!(pair.server_stats.accepted.load(Ordering::SeqCst), 40);
    assert_eq!(pair.server_stats.refused.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_failing_the_policy_is_refused_before_any_byte_passes() {
    // the client presents mock SEV-SNP evidence; the server accepts only (mock) TDX
    let EchoThroughProxies {
        pair,
        seen,
        service: _service,
    } = echo_through_proxies(("mock-snp", "mock-tdx"), TDX).await;
    let mut socket = TcpStream::connect(pair.client_address).await.unwrap();
    let _ = socket.write_all(b"model tensors").await;
    let (clean, back) = until_closed(&mut socket).await;
    assert!(
        !clean || back.is_empty(),
        "a refused connection must not carry data, got {back:?}"
    );
    reaches(&pair.server_stats.refused, 1).await;
    assert_eq!(pair.server_stats.refused.load(Ordering::SeqCst), 1);
    assert_eq!(pair.server_stats.accepted.load(Ordering::SeqCst), 0);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the service must never see a refused connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_rejecting_the_server_evidence_closes_the_connection() {
    // the server presents mock SNP evidence; the client accepts only mock TDX
    let EchoThroughProxies {
        pair,
        seen,
        service: _service,
    } = echo_through_proxies(TDX, ("mock-snp", "mock-tdx")).await;
    let mut socket = TcpStream::connect(pair.client_address).await.unwrap();
    let (clean, back) = until_closed(&mut socket).await;
    assert!(!clean || back.is_empty());
    reaches(&pair.client_stats.refused, 1).await;
    assert_eq!(pair.client_stats.refused.load(Ordering::SeqCst), 1);
    assert_eq!(seen.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_proxy_that_dies_ends_the_application_connection_and_later_ones_are_closed() {
    let EchoThroughProxies {
        pair,
        service: _service,
        ..
    } = echo_through_proxies(TDX, TDX).await;
    let mut socket = TcpStream::connect(pair.client_address).await.unwrap();
    socket.write_all(b"round 1").await.unwrap();
    let mut buffer = [0u8; 7];
    socket.read_exact(&mut buffer).await.unwrap();
    assert_eq!(&buffer, b"round 1");
    // the peer dies: its task (and every relay it spawned on this runtime stays, so drop the
    // listener and the live relay by aborting the server end and closing the service side)
    pair.server_task.abort();
    drop(_service);
    // a new connection cannot reach a server proxy that is gone: it is closed, not left hanging
    let mut late = TcpStream::connect(pair.client_address).await.unwrap();
    let (clean, back) = until_closed(&mut late).await;
    assert!(!clean || back.is_empty());
    assert!(pair.client_stats.failed.load(Ordering::SeqCst) + pair.client_stats.refused.load(Ordering::SeqCst) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_dies_mid_connection_closes_the_application_side() {
    // a service that answers once and then drops the connection (a crashed aggregator)
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buffer = [0u8; 5];
        socket.read_exact(&mut buffer).await.unwrap();
        socket.write_all(b"bye").await.unwrap();
        drop(socket);
    });
    let pair = proxies(target, settings(TDX), settings(TDX)).await;
    let mut socket = TcpStream::connect(pair.client_address).await.unwrap();
    socket.write_all(b"hello").await.unwrap();
    let (_, back) = until_closed(&mut socket).await;
    assert_eq!(back, b"bye");
}
