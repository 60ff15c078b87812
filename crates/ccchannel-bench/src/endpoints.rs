//! The three transports behind one message interface, and how a connected pair of them is made:
//! plaintext and TLS 1.3 (rustls) with the same u32 length framing written in one call, and the
//! attested secure channel with mock attestation; over tokio's duplex pipe or loopback TCP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ccchannel::{accept, connect, Config, Frame, MockProvider, Pattern, Policy};
use tokio::io::{duplex, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::cli::{Pipe, Transport};
use crate::result::TlsNegotiated;

const DUPLEX_BUFFER: usize = 4 << 20;

trait Messenger {
    async fn send_message(&mut self, data: &[u8]) -> std::io::Result<()>;
    async fn recv_message(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<()>;
}

/// plaintext and TLS: u32 length prefix, then the bytes, written with one call (as the channel does)
pub struct Framed<S>(S, Vec<u8>);

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

pub struct Secure<S>(ccchannel::Channel<S>);

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

/// Both ends' configurations of the two transports that have any, made once per run.
pub struct Peers {
    tls: Tls,
    /// (client, server)
    channel: (Config, Config),
}

impl Peers {
    pub fn new() -> Peers {
        Peers {
            tls: tls_configs(),
            channel: channel_configs(),
        }
    }
}

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

pub trait Stream: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Stream for T {}

pub enum Endpoint {
    Plain(Framed<Box<dyn Stream>>),
    Tls(Framed<tokio_rustls::client::TlsStream<Box<dyn Stream>>>),
    TlsServer(Framed<tokio_rustls::server::TlsStream<Box<dyn Stream>>>),
    Secure(Secure<Box<dyn Stream>>),
}

impl Endpoint {
    pub async fn send_message(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Endpoint::Plain(m) => m.send_message(data).await,
            Endpoint::Tls(m) => m.send_message(data).await,
            Endpoint::TlsServer(m) => m.send_message(data).await,
            Endpoint::Secure(m) => m.send_message(data).await,
        }
    }

    /// Send `data` sealed in place (the secure channel's `send_in_place`: `data` then holds
    /// ciphertext); the other transports send it as `send_message` does.
    pub async fn send_message_in_place(&mut self, data: &mut [u8]) -> std::io::Result<()> {
        match self {
            Endpoint::Secure(Secure(channel)) => channel.send_in_place(data).await.map_err(io_error),
            other => other.send_message(data).await,
        }
    }

    pub async fn recv_message(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<()> {
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
pub async fn tls_negotiated(peers: &Peers) -> TlsNegotiated {
    let tls = &peers.tls;
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
    TlsNegotiated {
        version: connection.protocol_version().map(|version| format!("{version:?}")),
        suite: connection
            .negotiated_cipher_suite()
            .map(|suite| format!("{:?}", suite.suite())),
    }
}

/// Connect a client and a server endpoint of `transport` over `pipe`; returns them and the handshake time.
pub async fn connect_pair(transport: Transport, pipe: Pipe, peers: &Peers) -> (Endpoint, Endpoint, Duration) {
    let (tls, configs) = (&peers.tls, &peers.channel);
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
