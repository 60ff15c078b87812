//! The record layer: length-prefixed AEAD records over any tokio AsyncRead + AsyncWrite.
//!
//! Wire format of a record: `u32 BE length || ciphertext`, where the ciphertext is the AEAD of
//! `type (1 byte) || body` with the 4-byte length as associated data and the Noise nonce format
//! (32 zero bits || 64-bit big-endian counter). Nonces are implicit and strictly increasing, so a
//! replayed, reordered or dropped record fails authentication. Record types:
//!
//! * `START`    first fragment of a message: `kind (1) || total length (u64 BE) || chunk`
//! * `CONTINUE` the next fragment: `chunk`
//! * `ATTEST`   attestation evidence (JSON) during the handshake's attestation step
//! * `REKEY`    the sender switched to the next key (Noise REKEY) after this record
//! * `CLOSE`    the sender will send nothing more; a stream that ends without it is truncated
//!
//! Lengths (record and message) are checked against the maxima before anything is allocated.
//! After any error the channel is closed for good and releases no plaintext.

use ring::aead::{Aad, Algorithm, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use zeroize::{Zeroize, Zeroizing};

use crate::error::ChannelError;
use crate::frame::Frame;

pub const RECORD_START: u8 = 1;
pub const RECORD_CONTINUE: u8 = 2;
pub const RECORD_ATTEST: u8 = 3;
pub const RECORD_REKEY: u8 = 4;
pub const RECORD_CLOSE: u8 = 5;

/// Largest plaintext chunk in one record; larger messages are fragmented.
pub const MAX_CHUNK: usize = 64 * 1024;
const TAG_LEN: usize = 16;
const START_HEADER: usize = 1 + 8;
/// Largest record on the wire (type + start header + chunk + tag).
pub const MAX_RECORD: usize = 1 + START_HEADER + MAX_CHUNK + TAG_LEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    AesGcm,
    ChaChaPoly,
}

impl Cipher {
    /// AES-256-GCM where the CPU has AES and carry-less multiply instructions, ChaCha20-Poly1305 otherwise.
    pub fn for_this_cpu() -> Cipher {
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        {
            if std::is_x86_feature_detected!("aes") && std::is_x86_feature_detected!("pclmulqdq") {
                return Cipher::AesGcm;
            }
            return Cipher::ChaChaPoly;
        }
        #[cfg(target_arch = "aarch64")]
        {
            if std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull") {
                return Cipher::AesGcm;
            }
        }
        #[allow(unreachable_code)]
        Cipher::ChaChaPoly
    }

    pub fn noise_name(self) -> &'static str {
        match self {
            Cipher::AesGcm => "AESGCM",
            Cipher::ChaChaPoly => "ChaChaPoly",
        }
    }

    pub fn algorithm(self) -> &'static Algorithm {
        match self {
            Cipher::AesGcm => &AES_256_GCM,
            Cipher::ChaChaPoly => &CHACHA20_POLY1305,
        }
    }
}

/// One direction's key state.
///
/// The raw key bytes are zeroized as soon as ring has expanded them (and the handshake's copies
/// when they go out of scope); ring's own expanded key schedule is not reachable for zeroizing.
pub(crate) struct Direction {
    cipher: Cipher,
    key: LessSafeKey,
    nonce: u64,
    bytes_since_rekey: u64,
}

impl Direction {
    pub(crate) fn new(cipher: Cipher, raw: [u8; 32]) -> Direction {
        let raw = Zeroizing::new(raw);
        let key = LessSafeKey::new(UnboundKey::new(cipher.algorithm(), &raw[..]).expect("32-byte key"));
        Direction { cipher, key, nonce: 0, bytes_since_rekey: 0 }
    }

    fn next_nonce(&mut self) -> Result<Nonce, ChannelError> {
        // u64::MAX is reserved for REKEY (as in Noise)
        if self.nonce == u64::MAX {
            return Err(ChannelError::Protocol("nonce space exhausted".into()));
        }
        let mut bytes = [0u8; 12];
        bytes[4..].copy_from_slice(&self.nonce.to_be_bytes());
        self.nonce += 1;
        Ok(Nonce::assume_unique_for_key(bytes))
    }

    /// Noise REKEY: k' = first 32 bytes of ENCRYPT(k, 2^64 - 1, empty, 32 zero bytes).
    fn rekey(&mut self) {
        let mut block = [0u8; 32];
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&u64::MAX.to_be_bytes());
        let _tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut block)
            .expect("sealing 32 bytes cannot fail");
        *self = Direction::new(self.cipher, block);
        block.zeroize();
    }
}

/// A secure channel: records in both directions over `S`.
pub struct Channel<S> {
    stream: S,
    send: Direction,
    recv: Direction,
    max_message: usize,
    rekey_after: u64,
    closed: bool,
    /// reusable buffers: one record being sealed, one being opened
    out: Vec<u8>,
    inbuf: Vec<u8>,
    pub(crate) handshake_hash: Vec<u8>,
    pub(crate) peer_evidence: Option<crate::attestation::Claims>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Channel<S> {
    pub(crate) fn new(stream: S, send: Direction, recv: Direction, max_message: usize, rekey_after: u64,
                      handshake_hash: Vec<u8>) -> Self {
        Channel {
            stream, send, recv, max_message, rekey_after, closed: false,
            out: Vec::with_capacity(4 + MAX_RECORD), inbuf: Vec::with_capacity(MAX_RECORD),
            handshake_hash, peer_evidence: None,
        }
    }

    /// The final Noise handshake hash (the channel binding).
    pub fn handshake_hash(&self) -> &[u8] {
        &self.handshake_hash
    }

    /// What the peer's verified evidence claimed, when it sent any.
    pub fn peer_claims(&self) -> Option<&crate::attestation::Claims> {
        self.peer_evidence.as_ref()
    }

    pub fn cipher(&self) -> Cipher {
        self.send.cipher
    }

    /// Move the channel onto another stream (the key state goes with it).
    pub fn replace_stream<T: AsyncRead + AsyncWrite + Unpin>(self, stream: T) -> Channel<T> {
        Channel {
            stream, send: self.send, recv: self.recv, max_message: self.max_message, rekey_after: self.rekey_after,
            closed: self.closed, out: self.out, inbuf: self.inbuf, handshake_hash: self.handshake_hash,
            peer_evidence: self.peer_evidence,
        }
    }

    fn fail<T>(&mut self, error: ChannelError) -> Result<T, ChannelError> {
        self.closed = true;
        self.inbuf.zeroize();
        Err(error)
    }

    /// Seal one record (type, prefix, chunk) into `out` and write it.
    async fn write_record(&mut self, kind: u8, prefix: &[u8], chunk: &[u8]) -> Result<(), ChannelError> {
        let body_len = 1 + prefix.len() + chunk.len();
        let wire_len = body_len + TAG_LEN;
        self.out.clear();
        self.out.extend_from_slice(&(wire_len as u32).to_be_bytes());
        self.out.push(kind);
        self.out.extend_from_slice(prefix);
        self.out.extend_from_slice(chunk);
        let nonce = self.send.next_nonce()?;
        let (header, body) = self.out.split_at_mut(4);
        let tag = self
            .send
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(&*header), body)
            .map_err(|_| ChannelError::Protocol("seal failed".into()))?;
        self.out.extend_from_slice(tag.as_ref());
        self.stream.write_all(&self.out).await?;
        self.send.bytes_since_rekey += body_len as u64;
        Ok(())
    }

    async fn maybe_rekey(&mut self) -> Result<(), ChannelError> {
        if self.send.bytes_since_rekey >= self.rekey_after {
            self.write_record(RECORD_REKEY, &[], &[]).await?;
            self.send.rekey();
        }
        Ok(())
    }

    /// Send one message (bytes or a tensor), fragmented into records as needed.
    pub async fn send(&mut self, frame: &Frame<'_>) -> Result<(), ChannelError> {
        if self.closed {
            return Err(ChannelError::Closed);
        }
        let (kind, header, data) = frame.encode_parts();
        let total = header.len() + data.len();
        if total > self.max_message {
            return Err(ChannelError::MessageTooLarge { len: total as u64, max: self.max_message as u64 });
        }
        let mut start = [0u8; START_HEADER];
        start[0] = kind;
        start[1..].copy_from_slice(&(total as u64).to_be_bytes());
        // the frame header (tensor dtype and shape) goes in front of the first chunk
        let mut first = Vec::with_capacity(header.len() + MAX_CHUNK.min(data.len()));
        first.extend_from_slice(&header);
        let room = MAX_CHUNK.saturating_sub(first.len());
        let head = data.len().min(room);
        first.extend_from_slice(&data[..head]);
        let result = async {
            self.write_record(RECORD_START, &start, &first).await?;
            self.maybe_rekey().await?;
            for chunk in data[head..].chunks(MAX_CHUNK) {
                self.write_record(RECORD_CONTINUE, &[], chunk).await?;
                self.maybe_rekey().await?;
            }
            self.stream.flush().await?;
            Ok::<(), ChannelError>(())
        }
        .await;
        match result {
            Ok(()) => Ok(()),
            Err(error) => self.fail(error),
        }
    }

    pub(crate) async fn send_attestation(&mut self, json: &[u8]) -> Result<(), ChannelError> {
        if json.len() > MAX_CHUNK {
            return Err(ChannelError::Protocol("evidence larger than one record".into()));
        }
        self.write_record(RECORD_ATTEST, &[], json).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Read and open one record; returns its type, body in `self.inbuf[1..]`.
    async fn read_record(&mut self) -> Result<u8, ChannelError> {
        let mut header = [0u8; 4];
        match self.stream.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ChannelError::Truncated),
            Err(e) => return Err(ChannelError::Io(e.to_string())),
        }
        let len = u32::from_be_bytes(header) as usize;
        if len > MAX_RECORD {
            return Err(ChannelError::RecordTooLarge { len, max: MAX_RECORD });
        }
        if len < 1 + TAG_LEN {
            return Err(ChannelError::Decrypt);
        }
        self.inbuf.resize(len, 0);
        self.stream.read_exact(&mut self.inbuf[..]).await?;
        let nonce = self.recv.next_nonce()?;
        let plain_len = self
            .recv
            .key
            .open_in_place(nonce, Aad::from(header), &mut self.inbuf[..])
            .map_err(|_| ChannelError::Decrypt)?
            .len();
        self.inbuf.truncate(plain_len);
        Ok(self.inbuf[0])
    }

    /// Receive the next message; Ok(None) when the peer closed the channel cleanly.
    pub async fn recv(&mut self) -> Result<Option<Frame<'static>>, ChannelError> {
        if self.closed {
            return Err(ChannelError::Closed);
        }
        match self.recv_inner().await {
            Ok(frame) => {
                if frame.is_none() {
                    self.closed = true;
                }
                Ok(frame)
            }
            Err(error) => self.fail(error),
        }
    }

    async fn recv_inner(&mut self) -> Result<Option<Frame<'static>>, ChannelError> {
        loop {
            let kind = self.read_record().await?;
            match kind {
                RECORD_REKEY => {
                    if self.inbuf.len() != 1 {
                        return Err(ChannelError::Protocol("rekey record with a body".into()));
                    }
                    self.recv.rekey();
                }
                RECORD_CLOSE => return Ok(None),
                RECORD_START => {
                    if self.inbuf.len() < 1 + START_HEADER {
                        return Err(ChannelError::Protocol("short start record".into()));
                    }
                    let frame_kind = self.inbuf[1];
                    let total = u64::from_be_bytes(self.inbuf[2..10].try_into().expect("8 bytes"));
                    if total > self.max_message as u64 {
                        return Err(ChannelError::MessageTooLarge { len: total, max: self.max_message as u64 });
                    }
                    let total = total as usize;
                    let mut message = Vec::with_capacity(total);
                    message.extend_from_slice(&self.inbuf[1 + START_HEADER..]);
                    while message.len() < total {
                        match self.read_record().await? {
                            RECORD_CONTINUE => message.extend_from_slice(&self.inbuf[1..]),
                            RECORD_REKEY if self.inbuf.len() == 1 => self.recv.rekey(),
                            other => return Err(ChannelError::Protocol(format!("record type {other} inside a message"))),
                        }
                        if message.len() > total {
                            return Err(ChannelError::Protocol("message longer than announced".into()));
                        }
                    }
                    if message.len() != total {
                        return Err(ChannelError::Protocol("message longer than announced".into()));
                    }
                    return Frame::decode(frame_kind, message).map(Some);
                }
                RECORD_CONTINUE => return Err(ChannelError::Protocol("continuation without a start".into())),
                RECORD_ATTEST => return Err(ChannelError::Protocol("attestation after the handshake".into())),
                other => return Err(ChannelError::Protocol(format!("unknown record type {other}"))),
            }
        }
    }

    pub(crate) async fn recv_attestation(&mut self) -> Result<Vec<u8>, ChannelError> {
        let kind = self.read_record().await?;
        if kind != RECORD_ATTEST {
            return Err(ChannelError::Attestation(crate::error::RejectReason::MissingEvidence));
        }
        Ok(self.inbuf[1..].to_vec())
    }

    /// Say goodbye: the peer's recv returns Ok(None); a stream that ends without this is truncated.
    pub async fn close(&mut self) -> Result<(), ChannelError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.write_record(RECORD_CLOSE, &[], &[]).await?;
        self.stream.flush().await?;
        self.stream.shutdown().await.ok();
        Ok(())
    }

    /// The underlying stream (for tests that need to observe or tamper with records).
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }
}
