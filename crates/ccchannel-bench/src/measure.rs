//! The measurements over a connected pair of endpoints: handshake latency, request/response round
//! trip and one-way throughput, each for one transport over one pipe.

use std::time::Instant;

use crate::cli::{Pipe, Transport};
use crate::endpoints::{connect_pair, Peers};
use crate::result::{HandshakeResult, RoundTripResult, ThroughputResult};
use crate::stats::LatencySummary;

pub async fn bench_handshakes(transport: Transport, pipe: Pipe, count: usize, peers: &Peers) -> HandshakeResult {
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count.max(1) / 20 {
        connect_pair(transport, pipe, peers).await; // warm-up
    }
    for _ in 0..count {
        let (_, _, elapsed) = connect_pair(transport, pipe, peers).await;
        samples.push(elapsed.as_secs_f64() * 1e6);
    }
    HandshakeResult {
        latency: LatencySummary::from_samples(samples),
        transport,
        pipe,
    }
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

pub async fn bench_rtt(transport: Transport, pipe: Pipe, size: usize, quick: bool, peers: &Peers) -> RoundTripResult {
    let (mut client, mut server, _) = connect_pair(transport, pipe, peers).await;
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
    RoundTripResult {
        latency: LatencySummary::from_samples(samples),
        transport,
        pipe,
        payload: size,
    }
}

pub async fn bench_throughput(
    transport: Transport,
    pipe: Pipe,
    size: usize,
    quick: bool,
    peers: &Peers,
) -> ThroughputResult {
    let total: usize = if quick { 64 << 20 } else { 256 << 20 };
    let count = (total / size).max(20);
    let (bytes, seconds) = one_way(transport, pipe, size, count, false, peers).await;
    // the secure channel again, sealing in the sender's buffer: the figure without the copy of the
    // caller's bytes that a borrowed message costs
    let in_place_mbps = match transport {
        Transport::SecureChannel => {
            let (bytes, seconds) = one_way(transport, pipe, size, count, true, peers).await;
            Some(bytes as f64 / seconds / 1e6)
        }
        _ => None,
    };
    ThroughputResult {
        transport,
        pipe,
        payload: size,
        messages: count,
        bytes,
        seconds,
        mbps: bytes as f64 / seconds / 1e6,
        in_place_mbps,
    }
}

/// `count` messages of `size` bytes one way over a new connection, then a one-byte ack back: the
/// bytes received and the seconds taken. In place, the sender hands the channel the same buffer
/// each time, holding the previous message's ciphertext (as good as any bytes to the AEAD): what
/// is timed is the channel's work, not refilling the buffer, as the AEAD floor times its own.
async fn one_way(
    transport: Transport,
    pipe: Pipe,
    size: usize,
    count: usize,
    in_place: bool,
    peers: &Peers,
) -> (usize, f64) {
    let (mut client, mut server, _) = connect_pair(transport, pipe, peers).await;
    let mut message = vec![0xA5u8; size];
    let start = Instant::now();
    let (sent, received) = tokio::join!(
        async {
            for _ in 0..count {
                if in_place {
                    client.send_message_in_place(&mut message).await?;
                } else {
                    client.send_message(&message).await?;
                }
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
    (bytes, start.elapsed().as_secs_f64())
}
