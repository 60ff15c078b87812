//! The handshake: a standard Noise pattern through `snow` (NN, or XX with static keys), then the
//! attestation step, in which evidence bound to the final handshake hash travels in the first
//! encrypted record (server first; the client too when attestation is mutual).
//!
//! NN:  -> e            <- e, ee            [<- ATTEST(server)]   [-> ATTEST(client)]
//! XX:  -> e            <- e, ee, s, es     -> s, se              [<- ATTEST] [-> ATTEST]
//!
//! The Noise transport keys (`Split()`) key the record layer (ring's AEAD); the handshake hash
//! covers both ephemeral keys (and both static keys for XX), so evidence bound to it cannot be
//! replayed into another session.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use zeroize::Zeroizing;

use crate::attestation::{binding, default_vendor_check, AttestationProvider, Evidence, Policy, VendorCheck};
use crate::error::{ChannelError, ProtocolViolation, RejectReason};
use crate::record::{Channel, Cipher, Direction};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// identity from attestation alone: two X25519 operations per side
    NN,
    /// static keys too (mutual authentication of keys), evidence bound to the sender's static key
    XX,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::NN => "NN",
            Pattern::XX => "XX",
        }
    }
}

/// A static X25519 key pair (XX). The private half is zeroized on drop.
#[derive(Clone)]
pub struct StaticKey {
    pub private: Zeroizing<Vec<u8>>,
    pub public: Vec<u8>,
}

impl StaticKey {
    pub fn generate(cipher: Cipher) -> Result<StaticKey, ChannelError> {
        let params = noise_params(Pattern::XX, cipher)?;
        let pair = snow::Builder::new(params).generate_keypair()?;
        Ok(StaticKey {
            private: Zeroizing::new(pair.private),
            public: pair.public,
        })
    }
}

#[derive(Clone)]
pub struct Config {
    pub pattern: Pattern,
    pub cipher: Cipher,
    /// required for XX
    pub static_key: Option<StaticKey>,
    /// produce evidence about this side (server: on by default in examples; client: mutual attestation)
    pub provider: Option<Arc<dyn AttestationProvider>>,
    /// require and verify the peer's evidence with this policy
    pub verify_peer: Option<Policy>,
    /// roots, vendor policy and collateral for the peer's real (SEV-SNP, TDX) evidence; None: the default
    /// (AMD's and Intel's pinned roots, debug off, no TDX collateral)
    pub vendor: Option<Arc<VendorCheck>>,
    /// hard maximum message size, checked before any allocation
    pub max_message: usize,
    /// switch to the next key after this many bytes in one direction
    pub rekey_after: u64,
}

impl Config {
    pub fn new(pattern: Pattern) -> Config {
        Config {
            pattern,
            cipher: Cipher::for_this_cpu(),
            static_key: None,
            provider: None,
            verify_peer: None,
            vendor: None,
            max_message: 64 * 1024 * 1024,
            rekey_after: 1 << 30,
        }
    }
}

fn noise_params(pattern: Pattern, cipher: Cipher) -> Result<snow::params::NoiseParams, ChannelError> {
    // four combinations, parsed once each rather than formatted and parsed per handshake
    static PARSED: std::sync::OnceLock<Vec<((Pattern, Cipher), snow::params::NoiseParams)>> =
        std::sync::OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        let mut all = Vec::new();
        for pattern in [Pattern::NN, Pattern::XX] {
            for cipher in [Cipher::AesGcm, Cipher::ChaChaPoly] {
                let name = format!("Noise_{}_25519_{}_SHA256", pattern.name(), cipher.noise_name());
                if let Ok(params) = name.parse() {
                    all.push(((pattern, cipher), params));
                }
            }
        }
        all
    });
    parsed
        .iter()
        .find(|(key, _)| *key == (pattern, cipher))
        .map(|(_, params)| params.clone())
        .ok_or_else(|| ChannelError::Handshake(format!("no Noise parameters for {pattern:?} with {cipher:?}")))
}

async fn write_handshake<S: AsyncWrite + Unpin>(stream: &mut S, message: &[u8]) -> Result<(), ChannelError> {
    let mut framed = Vec::with_capacity(2 + message.len());
    framed.extend_from_slice(&(message.len() as u16).to_be_bytes());
    framed.extend_from_slice(message);
    stream.write_all(&framed).await?;
    stream.flush().await?;
    Ok(())
}

async fn read_handshake<S: AsyncRead + Unpin>(stream: &mut S, buffer: &mut [u8]) -> Result<usize, ChannelError> {
    let mut length = [0u8; 2];
    stream.read_exact(&mut length).await?;
    let length = u16::from_be_bytes(length) as usize;
    if length > buffer.len() {
        return Err(ChannelError::Handshake(format!(
            "handshake message of {length} bytes is too long"
        )));
    }
    stream.read_exact(&mut buffer[..length]).await?;
    Ok(length)
}

fn builder(config: &Config) -> Result<snow::Builder<'_>, ChannelError> {
    let params = noise_params(config.pattern, config.cipher)?;
    let mut builder = if config.pattern == Pattern::NN {
        // NN uses each ephemeral key once: ring's X25519 (see ring_x25519.rs)
        snow::Builder::with_resolver(params, Box::new(crate::ring_x25519::RingEphemeralResolver))
    } else {
        snow::Builder::new(params)
    };
    if config.pattern == Pattern::XX {
        let key = config
            .static_key
            .as_ref()
            .ok_or_else(|| ChannelError::Handshake("the XX pattern needs a static key".into()))?;
        builder = builder.local_private_key(&key.private)?;
    }
    Ok(builder)
}

/// Run the handshake as the initiator (client).
pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    config: &Config,
) -> Result<Channel<S>, ChannelError> {
    let mut handshake = builder(config)?.build_initiator()?;
    let mut message = [0u8; 1024];
    let mut payload = [0u8; 1024];
    let length = handshake.write_message(&[], &mut message)?;
    write_handshake(&mut stream, &message[..length]).await?;
    let length = read_handshake(&mut stream, &mut message).await?;
    handshake.read_message(&message[..length], &mut payload)?;
    if config.pattern == Pattern::XX {
        let length = handshake.write_message(&[], &mut message)?;
        write_handshake(&mut stream, &message[..length]).await?;
    }
    finish(handshake, stream, config, true).await
}

/// Run the handshake as the responder (server).
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    config: &Config,
) -> Result<Channel<S>, ChannelError> {
    let mut handshake = builder(config)?.build_responder()?;
    let mut message = [0u8; 1024];
    let mut payload = [0u8; 1024];
    let length = read_handshake(&mut stream, &mut message).await?;
    handshake.read_message(&message[..length], &mut payload)?;
    let length = handshake.write_message(&[], &mut message)?;
    write_handshake(&mut stream, &message[..length]).await?;
    if config.pattern == Pattern::XX {
        let length = read_handshake(&mut stream, &mut message).await?;
        handshake.read_message(&message[..length], &mut payload)?;
    }
    finish(handshake, stream, config, false).await
}

async fn finish<S: AsyncRead + AsyncWrite + Unpin>(
    mut handshake: snow::HandshakeState,
    stream: S,
    config: &Config,
    initiator: bool,
) -> Result<Channel<S>, ChannelError> {
    if !handshake.is_handshake_finished() {
        return Err(ChannelError::Handshake("the handshake did not finish".into()));
    }
    let hash = handshake.get_handshake_hash().to_vec();
    let remote_static = handshake.get_remote_static().map(|k| k.to_vec());
    let (initiator_to_responder, responder_to_initiator) = handshake.dangerously_get_raw_split();
    let (initiator_to_responder, responder_to_initiator) = (
        Zeroizing::new(initiator_to_responder),
        Zeroizing::new(responder_to_initiator),
    );
    let (send, recv) = if initiator {
        (initiator_to_responder, responder_to_initiator)
    } else {
        (responder_to_initiator, initiator_to_responder)
    };
    let mut channel = Channel::new(
        stream,
        Direction::new(config.cipher, *send),
        Direction::new(config.cipher, *recv),
        config.max_message,
        config.rekey_after,
        hash,
    );
    let own_static = config.static_key.as_ref().map(|k| k.public.clone());
    // the server speaks first, so one flight carries the server's evidence
    if !initiator {
        attest_self(&mut channel, config, own_static.as_deref()).await?;
        verify_peer(&mut channel, config, remote_static.as_deref()).await?;
    } else {
        verify_peer(&mut channel, config, remote_static.as_deref()).await?;
        attest_self(&mut channel, config, own_static.as_deref()).await?;
    }
    Ok(channel)
}

async fn attest_self<S: AsyncRead + AsyncWrite + Unpin>(
    channel: &mut Channel<S>,
    config: &Config,
    own_static: Option<&[u8]>,
) -> Result<(), ChannelError> {
    if let Some(provider) = &config.provider {
        let evidence = provider.attest(&binding(channel.handshake_hash(), own_static))?;
        let json =
            serde_json::to_vec(&evidence).map_err(|_| ChannelError::Protocol(ProtocolViolation::EvidenceEncoding))?;
        channel.send_attestation(&json).await?;
    }
    Ok(())
}

async fn verify_peer<S: AsyncRead + AsyncWrite + Unpin>(
    channel: &mut Channel<S>,
    config: &Config,
    peer_static: Option<&[u8]>,
) -> Result<(), ChannelError> {
    if let Some(policy) = &config.verify_peer {
        let json = channel.recv_attestation().await?;
        let evidence: Evidence = serde_json::from_slice(&json)
            .map_err(|e| ChannelError::Attestation(RejectReason::Malformed(e.to_string())))?;
        let expected = binding(channel.handshake_hash(), peer_static);
        let vendor: &VendorCheck = match config.vendor.as_deref() {
            Some(vendor) => vendor,
            None => default_vendor_check(),
        };
        let claims = policy
            .verify_with(&evidence, &expected, vendor)
            .map_err(ChannelError::Attestation)?;
        channel.peer_evidence = Some(claims);
    }
    Ok(())
}
