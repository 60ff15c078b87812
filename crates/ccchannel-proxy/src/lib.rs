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
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Largest plaintext read relayed as one channel message.
pub const RELAY_CHUNK: usize = 64 * 1024;

/// Where this side's evidence comes from.
#[derive(Debug, Clone)]
pub enum EvidenceSource {
    /// deterministic mock evidence (machines without a TEE): technology, measurement label
    Mock {
        technology: String,
        measurement_label: String,
    },
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
            _ => Err(format!(
                "evidence '{text}': use 'mock:<technology>:<measurement-label>' or 'tsm'"
            )),
        }
    }

    pub fn provider(&self) -> Arc<dyn AttestationProvider> {
        match self {
            EvidenceSource::Mock {
                technology,
                measurement_label,
            } => Arc::new(MockProvider::new(technology, measurement_label)),
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
            handshake.checked_div(accepted).unwrap_or(0),
            self.bytes_to_peer.load(Ordering::Relaxed),
            self.bytes_from_peer.load(Ordering::Relaxed),
        )
    }
}

/// The channel's side of a relayed connection: the TCP stream plus the bytes read from it that the
/// channel has not consumed yet.
///
/// `Channel::recv` is not cancel-safe (a dropped receive loses the bytes it had read), so the relay
/// never waits inside it: it reads the socket itself when the socket is readable (a plain
/// non-blocking read, which loses nothing), keeps the bytes here, and calls `recv_into` only once a
/// whole message is buffered, so the receive completes without waiting and sending is never held
/// up behind a half-arrived message.
pub struct Inbound {
    tcp: TcpStream,
    buffer: Vec<u8>,
    start: usize,
}

/// Record framing on the wire (ccchannel's record layer): a 4-byte big-endian ciphertext length
/// (body + 16-byte tag), a 1-byte record type, for a START record 9 more header bytes (frame kind,
/// 8-byte message length), then the ciphertext.
const RECORD_START: u8 = 1;
const RECORD_CONTINUE: u8 = 2;
const RECORD_REKEY: u8 = 4;
const RECORD_CLOSE: u8 = 5;
const TAG_LEN: usize = 16;

impl Inbound {
    pub fn new(tcp: TcpStream) -> Inbound {
        Inbound {
            tcp,
            buffer: Vec::new(),
            start: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        &self.buffer[self.start..]
    }

    /// Whether the buffered bytes hold a whole message (or the close record), so that one
    /// `recv_into` completes without reading the socket. Unknown record types count as complete:
    /// the channel then reports the protocol error itself.
    fn message_ready(&self) -> bool {
        let data = self.pending();
        let mut at = 0usize;
        let mut remaining: Option<u64> = None;
        loop {
            if data.len() < at + 5 {
                return false;
            }
            let len = u32::from_be_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize;
            let kind = data[at + 4];
            let header = if kind == RECORD_START { 5 + 9 } else { 5 };
            if data.len() < at + header + len {
                return false;
            }
            let body = len.saturating_sub(TAG_LEN) as u64;
            match kind {
                RECORD_START => {
                    let total = u64::from_be_bytes(data[at + 6..at + 14].try_into().expect("8 bytes"));
                    let left = total.saturating_sub(body);
                    if left == 0 {
                        return true;
                    }
                    remaining = Some(left);
                }
                RECORD_CONTINUE => match remaining {
                    Some(left) if left > body => remaining = Some(left - body),
                    _ => return true,
                },
                RECORD_REKEY => {}
                RECORD_CLOSE => return true,
                _ => return true,
            }
            at += header + len;
        }
    }

    /// Read what the socket has now (never waits); Ok(false) when the peer closed the TCP connection.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.start > 0 && self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
        let old = self.buffer.len();
        self.buffer.resize(old + RELAY_CHUNK, 0);
        match self.tcp.try_read(&mut self.buffer[old..]) {
            Ok(n) => {
                self.buffer.truncate(old + n);
                Ok(n > 0)
            }
            Err(e) => {
                self.buffer.truncate(old);
                Err(e)
            }
        }
    }
}

impl tokio::io::AsyncRead for Inbound {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        out: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.start < this.buffer.len() {
            let n = out.remaining().min(this.buffer.len() - this.start);
            out.put_slice(&this.buffer[this.start..this.start + n]);
            this.start += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.tcp).poll_read(cx, out)
    }
}

impl tokio::io::AsyncWrite for Inbound {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, data)
    }

    // the channel's in-place send writes header, sealed chunk and tag as one vectored write
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        parts: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write_vectored(cx, parts)
    }

    fn is_write_vectored(&self) -> bool {
        tokio::io::AsyncWrite::is_write_vectored(&self.tcp)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Relay between a plaintext TCP connection and an established channel until both sides are done.
///
/// One task drives both directions. It waits only for readiness (which loses nothing when the
/// other branch wins): local bytes go out as one channel message per read; channel bytes are
/// buffered until a whole message is there, then opened and written to the local side. A local
/// end-of-stream travels as an empty message (the channel has no half-close of its own), so a
/// client that shuts down its writing side still gets the rest of the answer.
pub async fn relay(
    mut plain: TcpStream,
    mut channel: ccchannel::Channel<Inbound>,
    stats: &Stats,
) -> Result<(), String> {
    let mut chunk = vec![0u8; RELAY_CHUNK];
    let mut message = Vec::new();
    let (mut sent_eof, mut got_eof) = (false, false);
    loop {
        while channel.stream_mut().message_ready() {
            match channel
                .recv_into(&mut message)
                .await
                .map_err(|e| format!("channel receive: {e}"))?
            {
                Some(_) if message.is_empty() => {
                    // the peer's application finished writing
                    let _ = plain.shutdown().await;
                    got_eof = true;
                    if sent_eof {
                        let _ = channel.close().await;
                        return Ok(());
                    }
                }
                Some(_) => {
                    plain
                        .write_all(&message)
                        .await
                        .map_err(|e| format!("local connection: {e}"))?;
                    stats.bytes_from_peer.fetch_add(message.len() as u64, Ordering::Relaxed);
                }
                None => {
                    let _ = plain.shutdown().await;
                    return Ok(());
                }
            }
        }
        tokio::select! {
            ready = plain.readable(), if !sent_eof => {
                ready.map_err(|e| format!("local connection: {e}"))?;
                match plain.try_read(&mut chunk) {
                    Ok(0) => {
                        channel.send(&Frame::bytes(&[])).await.map_err(|e| format!("channel send: {e}"))?;
                        sent_eof = true;
                        if got_eof {
                            let _ = channel.close().await;
                            return Ok(());
                        }
                    }
                    Ok(n) => {
                        // sealed where it was read: the chunk is read afresh on the next turn
                        channel.send_in_place(&mut chunk[..n]).await.map_err(|e| format!("channel send: {e}"))?;
                        stats.bytes_to_peer.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        let _ = channel.close().await;
                        return Err(format!("local connection: {e}"));
                    }
                }
            }
            ready = channel.stream_mut().tcp.readable() => {
                ready.map_err(|e| format!("channel connection: {e}"))?;
                match channel.stream_mut().fill() {
                    Ok(true) => {}
                    Ok(false) => {
                        let _ = plain.shutdown().await;
                        if got_eof && sent_eof {
                            return Ok(());
                        }
                        return Err("the peer proxy closed the connection without closing the channel".into());
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(format!("channel connection: {e}")),
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
                    log(
                        "client",
                        &format!("{from}: cannot reach the server proxy {server}: {e}; connection closed"),
                    );
                    return;
                }
            };
            let _ = tcp.set_nodelay(true);
            let channel = match ccchannel::connect(Inbound::new(tcp), &config).await {
                Ok(channel) => channel,
                Err(e) => {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    log(
                        "client",
                        &format!("{from}: channel to {server} refused: {e}; connection closed"),
                    );
                    return;
                }
            };
            stats
                .handshake_us_total
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
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
            let channel = match ccchannel::accept(Inbound::new(tcp), &config).await {
                Ok(channel) => channel,
                Err(e) => {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    log("server", &format!("{from}: refused: {e}"));
                    return;
                }
            };
            stats
                .handshake_us_total
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            let plain = match TcpStream::connect(target).await {
                Ok(plain) => plain,
                Err(e) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    log(
                        "server",
                        &format!("{from}: cannot reach the service {target}: {e}; connection closed"),
                    );
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
