//! The record layer: length-prefixed AEAD records over any tokio AsyncRead + AsyncWrite.
//!
//! Wire format of a record: `header || ciphertext`, where the header is `u32 BE ciphertext length ||
//! type (1 byte)` (plus `kind (1) || total message length (u64 BE)` for `START`), the ciphertext is
//! the AEAD of the body with the whole header as associated data, and nonces use the Noise format
//! (32 zero bits || 64-bit big-endian counter). The header travels in the clear but is
//! authenticated; keeping it out of the ciphertext lets the receiver decrypt each chunk in place,
//! straight into the reassembled message. Nonces are implicit and strictly increasing, so a
//! replayed, reordered or dropped record fails authentication. Record types:
//!
//! * `START`    first record of a message (body: the tensor header for tensors, else the first chunk)
//! * `CONTINUE` the next chunk
//! * `ATTEST`   attestation evidence (JSON) during the handshake's attestation step
//! * `REKEY`    the sender switched to the next key (Noise REKEY) after this record
//! * `CLOSE`    the sender will send nothing more; a stream that ends without it is truncated
//!
//! Lengths (record and message) are checked against the maxima before anything is allocated.
//! After any error the channel is closed for good and releases no plaintext.

use ring::aead::{Aad, Algorithm, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use zeroize::{Zeroize, Zeroizing};

use crate::attestation::Claims;
use crate::error::{ChannelError, ProtocolViolation, RejectReason};
use crate::frame::Frame;
pub use crate::wire::{RecordType, UnknownRecordType, MAX_CHUNK, MAX_RECORD};
use crate::wire::{BASE_HEADER, KIND_BYTES, KIND_TENSOR, START_EXTRA, TAG_LEN};

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
        Direction {
            cipher,
            key,
            nonce: 0,
            bytes_since_rekey: 0,
        }
    }

    fn next_nonce(&mut self) -> Result<Nonce, ChannelError> {
        // u64::MAX is reserved for REKEY (as in Noise)
        if self.nonce == u64::MAX {
            return Err(ChannelError::Protocol(ProtocolViolation::NonceExhausted));
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
    pub(crate) peer_evidence: Option<Claims>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Channel<S> {
    pub(crate) fn new(
        stream: S,
        send: Direction,
        recv: Direction,
        max_message: usize,
        rekey_after: u64,
        handshake_hash: Vec<u8>,
    ) -> Self {
        Channel {
            stream,
            send,
            recv,
            max_message,
            rekey_after,
            closed: false,
            // grown on first use: a handshake that sends one small ATTEST record need not map two
            // 256 KiB buffers per side (measured: a few microseconds of a ~300 us handshake)
            out: Vec::new(),
            inbuf: Vec::new(),
            handshake_hash,
            peer_evidence: None,
        }
    }

    /// The final Noise handshake hash (the channel binding).
    pub fn handshake_hash(&self) -> &[u8] {
        &self.handshake_hash
    }

    /// What the peer's verified evidence claimed, when it sent any.
    pub fn peer_claims(&self) -> Option<&Claims> {
        self.peer_evidence.as_ref()
    }

    pub fn cipher(&self) -> Cipher {
        self.send.cipher
    }

    /// Move the channel onto another stream (the key state goes with it).
    pub fn replace_stream<T: AsyncRead + AsyncWrite + Unpin>(self, stream: T) -> Channel<T> {
        Channel {
            stream,
            send: self.send,
            recv: self.recv,
            max_message: self.max_message,
            rekey_after: self.rekey_after,
            closed: self.closed,
            out: self.out,
            inbuf: self.inbuf,
            handshake_hash: self.handshake_hash,
            peer_evidence: self.peer_evidence,
        }
    }

    fn fail<T>(&mut self, error: ChannelError) -> Result<T, ChannelError> {
        self.closed = true;
        self.inbuf.zeroize();
        Err(error)
    }

    /// Seal one record and write it: header (authenticated, in the clear), then the ciphertext.
    async fn write_record(&mut self, kind: RecordType, extra: &[u8], body: &[u8]) -> Result<(), ChannelError> {
        let header_len = BASE_HEADER + extra.len();
        self.out.clear();
        self.out
            .extend_from_slice(&((body.len() + TAG_LEN) as u32).to_be_bytes());
        self.out.push(kind as u8);
        self.out.extend_from_slice(extra);
        self.out.extend_from_slice(body);
        let nonce = self.send.next_nonce()?;
        let (header, sealed) = self.out.split_at_mut(header_len);
        let tag = self
            .send
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(&*header), sealed)
            .map_err(|_| ChannelError::Protocol(ProtocolViolation::SealFailed))?;
        self.out.extend_from_slice(tag.as_ref());
        self.stream.write_all(&self.out).await?;
        self.send.bytes_since_rekey += body.len() as u64;
        Ok(())
    }

    async fn maybe_rekey(&mut self) -> Result<(), ChannelError> {
        if self.send.bytes_since_rekey >= self.rekey_after {
            self.write_record(RecordType::Rekey, &[], &[]).await?;
            self.send.rekey();
        }
        Ok(())
    }

    /// Whether a message of `total` bytes may be sent: the channel open, the size within its limit.
    fn admit(&self, total: usize) -> Result<(), ChannelError> {
        if self.closed {
            return Err(ChannelError::Closed);
        }
        if total > self.max_message {
            return Err(ChannelError::MessageTooLarge {
                len: total as u64,
                max: self.max_message as u64,
            });
        }
        Ok(())
    }

    /// Send one message (bytes or a tensor), fragmented into records as needed.
    pub async fn send(&mut self, frame: &Frame<'_>) -> Result<(), ChannelError> {
        let (kind, tensor_header, data) = frame.encode_parts();
        let total = tensor_header.len() + data.len();
        self.admit(total)?;
        let mut extra = [0u8; START_EXTRA];
        extra[0] = kind;
        extra[1..].copy_from_slice(&(total as u64).to_be_bytes());
        let result = async {
            // a tensor's dtype and shape travel in the START record; bytes start with their first chunk
            let rest = if tensor_header.is_empty() {
                let head = data.len().min(MAX_CHUNK);
                self.write_record(RecordType::Start, &extra, &data[..head]).await?;
                &data[head..]
            } else {
                self.write_record(RecordType::Start, &extra, &tensor_header).await?;
                data
            };
            self.maybe_rekey().await?;
            for chunk in rest.chunks(MAX_CHUNK) {
                self.write_record(RecordType::Continue, &[], chunk).await?;
                self.maybe_rekey().await?;
            }
            self.stream.flush().await?;
            Ok::<(), ChannelError>(())
        }
        .await;
        result.or_else(|error| self.fail(error))
    }

    /// Send one message of raw bytes sealed in place in the caller's buffer: no copy of `data` is
    /// made on this side. Each record's chunk of `data` is sealed where it lies (ring's
    /// `seal_in_place_separate_tag`) and written with one vectored write of its header, the sealed
    /// chunk and its tag, so the one copy a byte takes is the stream's own (the pipe's or the
    /// socket's). On return, successful or not, `data` holds ciphertext: the caller's plaintext is
    /// consumed. The records are those `send(&Frame::bytes(data))` writes (the same wire format).
    ///
    /// A stream without vectored writes (`is_write_vectored` false) would turn each record into
    /// three writes; there the message goes through [`Channel::send`]'s send buffer instead.
    pub async fn send_in_place(&mut self, data: &mut [u8]) -> Result<(), ChannelError> {
        if !self.stream.is_write_vectored() {
            return self.send(&Frame::bytes(data)).await;
        }
        let total = data.len();
        self.admit(total)?;
        let result = async {
            let mut header = [0u8; BASE_HEADER + START_EXTRA];
            let mut kind = RecordType::Start;
            let mut chunks = data.chunks_mut(MAX_CHUNK);
            // an empty message is one START record with an empty body
            let mut next: Option<&mut [u8]> = Some(chunks.next().unwrap_or(&mut []));
            while let Some(chunk) = next.take() {
                let header_len = if kind == RecordType::Start {
                    header[BASE_HEADER] = KIND_BYTES;
                    header[BASE_HEADER + 1..].copy_from_slice(&(total as u64).to_be_bytes());
                    BASE_HEADER + START_EXTRA
                } else {
                    BASE_HEADER
                };
                header[..4].copy_from_slice(&((chunk.len() + TAG_LEN) as u32).to_be_bytes());
                header[4] = kind as u8;
                let nonce = self.send.next_nonce()?;
                let tag = self
                    .send
                    .key
                    .seal_in_place_separate_tag(nonce, Aad::from(&header[..header_len]), chunk)
                    .map_err(|_| ChannelError::Protocol(ProtocolViolation::SealFailed))?;
                write_all_vectored(&mut self.stream, [&header[..header_len], chunk, tag.as_ref()]).await?;
                self.send.bytes_since_rekey += chunk.len() as u64;
                self.maybe_rekey().await?;
                kind = RecordType::Continue;
                next = chunks.next();
            }
            self.stream.flush().await?;
            Ok::<(), ChannelError>(())
        }
        .await;
        result.or_else(|error| self.fail(error))
    }

    pub(crate) async fn send_attestation(&mut self, json: &[u8]) -> Result<(), ChannelError> {
        if json.len() > MAX_CHUNK {
            return Err(ChannelError::Protocol(ProtocolViolation::EvidenceTooLarge {
                len: json.len(),
                max: MAX_CHUNK,
            }));
        }
        self.write_record(RecordType::Attest, &[], json).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Read one record header; returns (type, ciphertext length, START extra if any).
    async fn read_header(&mut self) -> Result<(RecordType, usize, [u8; BASE_HEADER + START_EXTRA]), ChannelError> {
        let mut header = [0u8; BASE_HEADER + START_EXTRA];
        match self.stream.read_exact(&mut header[..BASE_HEADER]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ChannelError::Truncated),
            Err(e) => return Err(ChannelError::Io(e.to_string())),
        }
        let len = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        // an unknown type is a corrupted header: treat it like any other authentication failure
        let kind = RecordType::try_from(header[4]).map_err(|_| ChannelError::Decrypt)?;
        if len > MAX_RECORD {
            return Err(ChannelError::RecordTooLarge { len, max: MAX_RECORD });
        }
        if len < TAG_LEN {
            return Err(ChannelError::Decrypt);
        }
        if kind == RecordType::Start {
            self.stream.read_exact(&mut header[BASE_HEADER..]).await?;
        }
        Ok((kind, len, header))
    }

    /// Read `len` bytes of ciphertext onto the end of `into` and open them in place there: the one
    /// copy a record's bytes take on this side is the stream's own read into the message buffer.
    async fn open_into(&mut self, header: &[u8], len: usize, into: &mut Vec<u8>) -> Result<(), ChannelError> {
        let at = into.len();
        read_appending(&mut self.stream, into, len).await?;
        let nonce = self.recv.next_nonce()?;
        let plain = self
            .recv
            .key
            .open_in_place(nonce, Aad::from(header), &mut into[at..])
            .map_err(|_| ChannelError::Decrypt)?
            .len();
        into.truncate(at + plain);
        Ok(())
    }

    /// Read a record that is not part of a message; its body lands in `self.inbuf`.
    async fn read_control(&mut self, kind: RecordType, len: usize, header: &[u8]) -> Result<RecordType, ChannelError> {
        let mut body = std::mem::take(&mut self.inbuf);
        body.clear();
        let result = self.open_into(header, len, &mut body).await;
        self.inbuf = body;
        result.map(|_| kind)
    }

    /// Receive the next message; Ok(None) when the peer closed the channel cleanly.
    pub async fn recv(&mut self) -> Result<Option<Frame<'static>>, ChannelError> {
        match self.recv_raw(Vec::new()).await? {
            Some((kind, tensor_header, message)) => match Frame::from_parts(kind, tensor_header, message) {
                Ok(frame) => Ok(Some(frame)),
                Err(error) => self.fail(error),
            },
            None => Ok(None),
        }
    }

    /// Receive the next message's payload into `buffer`, reusing its allocation (for streaming many
    /// large messages); returns the frame kind, or None when the peer closed the channel cleanly.
    /// For tensors the dtype and shape are checked against the data and dropped; use `recv` to get them.
    pub async fn recv_into(&mut self, buffer: &mut Vec<u8>) -> Result<Option<u8>, ChannelError> {
        let mut reuse = std::mem::take(buffer);
        reuse.clear();
        match self.recv_raw(reuse).await? {
            Some((kind, _tensor_header, message)) => {
                *buffer = message;
                Ok(Some(kind))
            }
            None => Ok(None),
        }
    }

    async fn recv_raw(&mut self, message: Vec<u8>) -> Result<Option<(u8, Vec<u8>, Vec<u8>)>, ChannelError> {
        if self.closed {
            return Err(ChannelError::Closed);
        }
        match self.recv_inner(message).await {
            Ok(result) => {
                if result.is_none() {
                    self.closed = true;
                }
                Ok(result)
            }
            Err(error) => self.fail(error),
        }
    }

    async fn recv_inner(&mut self, mut message: Vec<u8>) -> Result<Option<(u8, Vec<u8>, Vec<u8>)>, ChannelError> {
        loop {
            let (kind, len, header) = self.read_header().await?;
            match kind {
                RecordType::Rekey | RecordType::Close | RecordType::Attest => {
                    self.read_control(kind, len, &header[..BASE_HEADER]).await?;
                    match kind {
                        RecordType::Rekey if self.inbuf.is_empty() => self.recv.rekey(),
                        RecordType::Close if self.inbuf.is_empty() => return Ok(None),
                        RecordType::Attest => {
                            return Err(ChannelError::Protocol(ProtocolViolation::AttestationAfterHandshake))
                        }
                        record => {
                            return Err(ChannelError::Protocol(ProtocolViolation::ControlRecordWithBody {
                                record,
                            }))
                        }
                    }
                }
                RecordType::Start => {
                    let frame_kind = header[BASE_HEADER];
                    let total = u64::from_be_bytes(header[BASE_HEADER + 1..].try_into().expect("8 bytes"));
                    // checked before anything is allocated (the header is authenticated with the first chunk)
                    if total > self.max_message as u64 {
                        return Err(ChannelError::MessageTooLarge {
                            len: total,
                            max: self.max_message as u64,
                        });
                    }
                    let total = total as usize;
                    message.clear();
                    message.reserve(total + TAG_LEN);
                    self.open_into(&header, len, &mut message).await?;
                    if frame_kind != KIND_BYTES && frame_kind != KIND_TENSOR {
                        // checked once the header has authenticated; refused for recv_into too, which hands out the payload without building a Frame
                        return Err(ChannelError::Protocol(ProtocolViolation::UnknownFrameKind(frame_kind)));
                    }
                    let mut tensor_header = Vec::new();
                    if frame_kind == KIND_TENSOR {
                        tensor_header = std::mem::take(&mut message);
                        message.reserve(total.saturating_sub(tensor_header.len()) + TAG_LEN);
                    }
                    while tensor_header.len() + message.len() < total {
                        let (next, next_len, next_header) = self.read_header().await?;
                        match next {
                            RecordType::Continue => {
                                self.open_into(&next_header[..BASE_HEADER], next_len, &mut message)
                                    .await?
                            }
                            RecordType::Rekey => {
                                self.read_control(next, next_len, &next_header[..BASE_HEADER]).await?;
                                if !self.inbuf.is_empty() {
                                    return Err(ChannelError::Protocol(ProtocolViolation::ControlRecordWithBody {
                                        record: RecordType::Rekey,
                                    }));
                                }
                                self.recv.rekey();
                            }
                            record => {
                                return Err(ChannelError::Protocol(ProtocolViolation::UnexpectedRecordInMessage {
                                    record,
                                }))
                            }
                        }
                    }
                    if tensor_header.len() + message.len() != total {
                        return Err(ChannelError::Protocol(ProtocolViolation::MessageLongerThanAnnounced {
                            announced: total as u64,
                            received: (tensor_header.len() + message.len()) as u64,
                        }));
                    }
                    if frame_kind == KIND_TENSOR {
                        // validate dtype and shape against the data before handing anything out
                        let check = Frame::from_parts(frame_kind, tensor_header.clone(), std::mem::take(&mut message))?;
                        message = check.into_payload();
                    }
                    return Ok(Some((frame_kind, tensor_header, message)));
                }
                RecordType::Continue => {
                    return Err(ChannelError::Protocol(ProtocolViolation::ContinuationWithoutStart))
                }
            }
        }
    }

    pub(crate) async fn recv_attestation(&mut self) -> Result<Vec<u8>, ChannelError> {
        let (kind, len, header) = self.read_header().await?;
        if kind != RecordType::Attest {
            return Err(ChannelError::Attestation(RejectReason::MissingEvidence));
        }
        self.read_control(kind, len, &header[..BASE_HEADER]).await?;
        Ok(std::mem::take(&mut self.inbuf))
    }

    /// Say goodbye: the peer's recv returns Ok(None); a stream that ends without this is truncated.
    pub async fn close(&mut self) -> Result<(), ChannelError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.write_record(RecordType::Close, &[], &[]).await?;
        self.stream.flush().await?;
        self.stream.shutdown().await.ok();
        Ok(())
    }

    /// Seal and send one record of any type with any body, bypassing the framing rules: for tests
    /// that check how a peer reacts to a well-authenticated record that breaks them.
    #[doc(hidden)]
    pub async fn send_raw_record_for_tests(
        &mut self,
        kind: RecordType,
        extra: &[u8],
        body: &[u8],
    ) -> Result<(), ChannelError> {
        self.write_record(kind, extra, body).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Switch to the next key after `bytes` sent in one direction (for tests of REKEY without a handshake).
    #[doc(hidden)]
    pub fn set_rekey_after_for_tests(&mut self, bytes: u64) {
        self.rekey_after = bytes;
    }

    /// The underlying stream (for tests that need to observe or tamper with records).
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }
}

/// Write all of `parts`, in order, with vectored writes (one call when the stream takes it all).
async fn write_all_vectored<S: AsyncWrite + Unpin>(stream: &mut S, mut parts: [&[u8]; 3]) -> Result<(), ChannelError> {
    while parts.iter().any(|part| !part.is_empty()) {
        let slices = parts.map(std::io::IoSlice::new);
        let mut written = stream.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
        }
        for part in parts.iter_mut() {
            let step = written.min(part.len());
            *part = &part[step..];
            written -= step;
        }
    }
    Ok(())
}

/// Read exactly `len` more bytes onto the end of `into`, straight into its spare capacity.
///
/// The stream writes into memory the vector has reserved but not initialised (tokio's `read_buf`
/// through a `Take` that stops at `len`), so the bytes are not zero-filled first and then
/// overwritten: at a record's 256 KiB that fill was a whole extra pass over every byte received.
/// A stream that ends early is `Truncated`; what was read so far stays in `into` for the caller to
/// discard (every caller fails the channel, which releases nothing).
async fn read_appending<S: AsyncRead + Unpin>(
    stream: &mut S,
    into: &mut Vec<u8>,
    len: usize,
) -> Result<(), ChannelError> {
    into.reserve(len);
    let end = into.len() + len;
    let mut limited = (&mut *stream).take(len as u64);
    while into.len() < end {
        if limited.read_buf(into).await? == 0 {
            return Err(ChannelError::Truncated);
        }
    }
    Ok(())
}
