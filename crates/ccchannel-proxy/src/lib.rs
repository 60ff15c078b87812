//! Proxy mode of the attested secure channel.
//!
//! An application that speaks plain TCP (OpenFL's gRPC here) is carried through ccchannel
//! without changing it: on the client host a [`client`] proxy listens on a local port, and for
//! every connection the application opens there it opens one TCP connection to the server host,
//! runs the channel handshake (Noise NN, both sides attest and check the peer's evidence against
//! their policy) and then relays bytes both ways as channel records. On the server host a
//! [`server`] proxy accepts those connections, runs the responder side of the handshake and
//! connects each one to the real service on its host. One channel per application connection;
//! a connection whose peer fails the policy is refused (closed before any application byte
//! passes), and the refusal reason is logged.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccchannel::{AttestationProvider, Config, Frame, MockProvider, Pattern, Policy, TsmProvider};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};

/// Largest plaintext read relayed as one channel message.
pub const RELAY_CHUNK: usize = 64 * 1024;

/// Where this side's evidence comes from.
#[derive(Debug, Clone)]
pub enum EvidenceSource {
    /// deterministic mock evidence (machines without a TEE): technology, measurement label
    Mock { technology: String, measurement_label: String },
    /// configfs-tsm on a confidential VM (SEV-SNP or TDX)
    Tsm,
}

impl EvidenceSource {
    /// `mock:<technology>:<measurement-label>` or `tsm`.
    pub fn parse(text: &str) -> Result<EvidenceSource, String> {
        if text == "tsm" {
            return Ok(EvidenceSource::Tsm);
        }
        let mut parts = text.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("mock"), Some(technology), Some(label)) if !technology.is_empty() => Ok(EvidenceSource::Mock {
                technology: technology.to_string(),
                measurement_label: label.to_string(),
            }),
            _ => Err(format!("evidence '{text}': use 'mock:<technology>:<measurement-label>' or 'tsm'")),
        }
    }

    pub fn provider(&self) -> Arc<dyn AttestationProvider> {
        match self {
            EvidenceSource::Mock { technology, measurement_label } => {
                Arc::new(MockProvider::new(technology, measurement_label))
            }
            EvidenceSource::Tsm => Arc::new(TsmProvider::default()),
        }
    }
}

/// What one proxy end needs: its own evidence and what it accepts from the peer.
#[derive(Clone)]
pub struct ProxySettings {
    pub evidence: EvidenceSource,
    pub policy: Policy,
}

impl ProxySettings {
    pub fn channel_config(&self) -> Config {
        let mut config = Config::new(Pattern::NN);
        config.provider = Some(self.evidence.provider());
        config.verify_peer = Some(self.policy.clone());
        config
    }
}

/// Counters a proxy keeps (printed by the binary when it stops).
#[derive(Debug, Default)]
pub struct Stats {
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub failed: AtomicU64,
    pub handshake_us_total: AtomicU64,
    pub bytes_to_peer: AtomicU64,
    pub bytes_from_peer: AtomicU64,
}

impl Stats {
    pub fn json(&self) -> String {
        let accepted = self.accepted.load(Ordering::Relaxed);
        let handshake = self.handshake_us_total.load(Ordering::Relaxed);
        format!(
            "{{\"accepted\":{},\"refused\":{},\"failed\":{},\"handshake_us_mean\":{},\"bytes_to_peer\":{},\"bytes_from_peer\":{}}}",
            accepted,
            self.refused.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            if accepted > 0 { handshake / accepted } else { 0 },
            self.bytes_to_peer.load(Ordering::Relaxed),
            self.bytes_from_peer.load(Ordering::Relaxed),
        )
    }
}

/// Relay between a plaintext TCP connection and an established channel until either side closes.
///
/// One task drives both directions: it waits for either socket to become readable (waiting for
/// readiness loses no data, unlike dropping a half-done read), then moves one chunk or one
/// message. A message the peer started is always sent whole, so finishing its receive cannot wait
/// on this side.
pub async fn relay(mut plain: TcpStream, mut channel: ccchannel::Channel<TcpStream>, stats: &Stats)
    -> Result<(), String> {
    let mut chunk = vec![0u8; RELAY_CHUNK];
    let mut message = Vec::new();
    loop {
        let plain_ready = plain.ready(Interest::READABLE);
        let peer_ready = channel.stream_mut().ready(Interest::READABLE);
        tokio::select! {
            ready = plain_ready => {
                ready.map_err(|e| format!("local connection: {e}"))?;
                match plain.try_read(&mut chunk) {
                    Ok(0) => {
                        let _ = channel.close().await;
                        return Ok(());
                    }
                    Ok(n) => {
                        channel.send(&Frame::bytes(&chunk[..n])).await.map_err(|e| format!("channel send: {e}"))?;
                        stats.bytes_to_peer.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => {
                        let _ = channel.close().await;
                        return Err(format!("local connection: {e}"));
                    }
                }
            }
            ready = peer_ready => {
                ready.map_err(|e| format!("channel connection: {e}"))?;
                match channel.recv_into(&mut message).await.map_err(|e| format!("channel receive: {e}"))? {
                    Some(_) => {
                        plain.write_all(&message).await.map_err(|e| format!("local connection: {e}"))?;
                        stats.bytes_from_peer.fetch_add(message.len() as u64, Ordering::Relaxed);
                    }
                    None => {
                        let _ = plain.shutdown().await;
                        return Ok(());
                    }
                }
            }
        }
    }
}

fn log(role: &str, line: &str) {
    eprintln!("ccchannel-proxy {role}: {line}");
}

/// Client end: accept plaintext connections on `listener`, carry each through its own channel to `server`.
pub async fn client(listener: TcpListener, server: SocketAddr, settings: ProxySettings, stats: Arc<Stats>) {
    let config = Arc::new(settings.channel_config());
    loop {
        let (plain, from) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                log("client", &format!("accept: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let config = config.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let _ = plain.set_nodelay(true);
            let started = Instant::now();
            let tcp = match TcpStream::connect(server).await {
                Ok(tcp) => tcp,
                Err(e) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    log("client", &format!("{from}: cannot reach the server proxy {server}: {e}; connection closed"));
                    return;
                }
            };
            let _ = tcp.set_nodelay(true);
            let channel = match ccchannel::connect(tcp, &config).await {
                Ok(channel) => channel,
                Err(e) => {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    log("client", &format!("{from}: channel to {server} refused: {e}; connection closed"));
                    return;
                }
            };
            stats.handshake_us_total.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            stats.accepted.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = relay(plain, channel, &stats).await {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                log("client", &format!("{from}: {e}"));
            }
        });
    }
}

/// Server end: accept channel connections on `listener`, check the peer, connect each to `target`.
pub async fn server(listener: TcpListener, target: SocketAddr, settings: ProxySettings, stats: Arc<Stats>) {
    let config = Arc::new(settings.channel_config());
    loop {
        let (tcp, from) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                log("server", &format!("accept: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let config = config.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let started = Instant::now();
            let channel = match ccchannel::accept(tcp, &config).await {
                Ok(channel) => channel,
                Err(e) => {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    log("server", &format!("{from}: refused: {e}"));
                    return;
                }
            };
            stats.handshake_us_total.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            let plain = match TcpStream::connect(target).await {
                Ok(plain) => plain,
                Err(e) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    log("server", &format!("{from}: cannot reach the service {target}: {e}; connection closed"));
                    return;
                }
            };
            let _ = plain.set_nodelay(true);
            stats.accepted.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = relay(plain, channel, &stats).await {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                log("server", &format!("{from}: {e}"));
            }
        });
    }
}
