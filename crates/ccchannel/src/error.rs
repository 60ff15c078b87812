//! Errors as types: every failure says what went wrong; none panics on peer input.

use std::fmt;

use crate::wire::{RecordType, MAX_DIMS};

/// Why a peer's attestation evidence was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectReason {
    /// The peer sent no evidence although the policy requires it.
    MissingEvidence,
    /// The evidence could not be parsed.
    Malformed(String),
    /// The report data does not commit to this handshake (and static key): replayed or lifted evidence.
    WrongBinding,
    /// The technology is not one the policy accepts.
    WrongTechnology { got: String },
    /// The measurement differs from the expected one.
    WrongMeasurement { got: String },
    /// The evidence is older than the policy allows.
    Expired { age_secs: u64 },
    /// The vendor verifier (`ccverify`) refused real SEV-SNP or TDX evidence: bad signature, unknown
    /// root, revoked, TCB too old, debug enabled, missing certificate or collateral, ...
    Vendor(ccverify::Rejection),
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::MissingEvidence => write!(f, "the peer sent no attestation evidence"),
            RejectReason::Malformed(why) => write!(f, "malformed evidence: {why}"),
            RejectReason::WrongBinding => write!(f, "evidence is not bound to this handshake"),
            RejectReason::WrongTechnology { got } => write!(f, "technology {got} is not accepted"),
            RejectReason::WrongMeasurement { got } => write!(f, "measurement {got} is not the expected one"),
            RejectReason::Expired { age_secs } => write!(f, "evidence is {age_secs} s old"),
            RejectReason::Vendor(rejection) => write!(f, "{rejection}"),
        }
    }
}

/// How a peer (or this side's own input) broke the protocol's rules, as rustls' `PeerMisbehaved`
/// names each misbehaviour: tests assert the exact variant, and callers can tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// 2^64 - 1 records in one direction without a rekey (the last nonce is reserved for REKEY).
    NonceExhausted,
    /// The AEAD refused to seal (a chunk beyond what the algorithm allows).
    SealFailed,
    /// This side's own evidence does not fit in one record.
    EvidenceTooLarge { len: usize, max: usize },
    /// This side's own evidence could not be encoded.
    EvidenceEncoding,
    /// An ATTEST record arrived after the handshake finished.
    AttestationAfterHandshake,
    /// A REKEY or CLOSE record carried a body.
    ControlRecordWithBody { record: RecordType },
    /// A record other than CONTINUE or REKEY arrived in the middle of a message.
    UnexpectedRecordInMessage { record: RecordType },
    /// A CONTINUE record arrived outside a message.
    ContinuationWithoutStart,
    /// The chunks of a message add up to more than its announced length.
    MessageLongerThanAnnounced { announced: u64, received: u64 },
    /// A message's frame kind is neither bytes nor tensor.
    UnknownFrameKind(u8),
    /// A tensor's dtype code is not one of [`crate::wire::DType`].
    UnknownDType(u8),
    /// A tensor has more dimensions than [`crate::wire::MAX_DIMS`].
    TooManyDimensions(usize),
    /// A tensor header is shorter than its dimension count says, or has bytes left over.
    MalformedTensorHeader,
    /// A tensor's data length does not match its shape and dtype.
    TensorSizeMismatch { len: usize, shape: Vec<u64> },
}

impl fmt::Display for ProtocolViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolViolation::NonceExhausted => write!(f, "nonce space exhausted"),
            ProtocolViolation::SealFailed => write!(f, "the AEAD refused to seal a record"),
            ProtocolViolation::EvidenceTooLarge { len, max } => {
                write!(f, "evidence of {len} bytes is larger than one record ({max})")
            }
            ProtocolViolation::EvidenceEncoding => write!(f, "evidence could not be encoded"),
            ProtocolViolation::AttestationAfterHandshake => write!(f, "attestation after the handshake"),
            ProtocolViolation::ControlRecordWithBody { record } => write!(f, "{record:?} record with a body"),
            ProtocolViolation::UnexpectedRecordInMessage { record } => {
                write!(f, "{record:?} record inside a message")
            }
            ProtocolViolation::ContinuationWithoutStart => write!(f, "continuation without a start"),
            ProtocolViolation::MessageLongerThanAnnounced { announced, received } => {
                write!(
                    f,
                    "message of {received} bytes is longer than the announced {announced}"
                )
            }
            ProtocolViolation::UnknownFrameKind(kind) => write!(f, "unknown frame kind {kind}"),
            ProtocolViolation::UnknownDType(code) => write!(f, "unknown dtype {code}"),
            ProtocolViolation::TooManyDimensions(n) => {
                write!(f, "{n} dimensions (at most {MAX_DIMS})")
            }
            ProtocolViolation::MalformedTensorHeader => write!(f, "malformed tensor header"),
            ProtocolViolation::TensorSizeMismatch { len, shape } => {
                write!(f, "tensor data of {len} bytes does not match shape {shape:?}")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelError {
    /// The transport failed.
    Io(String),
    /// The Noise handshake failed (bad message, wrong pattern, ...).
    Handshake(String),
    /// The peer's attestation was rejected.
    Attestation(RejectReason),
    /// A record did not authenticate: tampered, replayed, reordered or dropped. No plaintext is released.
    Decrypt,
    /// A record's length field exceeds the maximum (checked before anything is allocated).
    RecordTooLarge { len: usize, max: usize },
    /// A message's announced length exceeds the maximum (checked before anything is allocated).
    MessageTooLarge { len: u64, max: u64 },
    /// The stream ended without a close record.
    Truncated,
    /// A well-authenticated record or message that breaks the protocol's rules.
    Protocol(ProtocolViolation),
    /// The channel was closed (explicitly, or after an earlier error).
    Closed,
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelError::Io(why) => write!(f, "transport error: {why}"),
            ChannelError::Handshake(why) => write!(f, "handshake failed: {why}"),
            ChannelError::Attestation(reason) => write!(f, "attestation rejected: {reason}"),
            ChannelError::Decrypt => write!(f, "a record failed authentication"),
            ChannelError::RecordTooLarge { len, max } => write!(f, "record of {len} bytes exceeds {max}"),
            ChannelError::MessageTooLarge { len, max } => write!(f, "message of {len} bytes exceeds {max}"),
            ChannelError::Truncated => write!(f, "the stream ended without a close record"),
            ChannelError::Protocol(violation) => write!(f, "protocol error: {violation}"),
            ChannelError::Closed => write!(f, "the channel is closed"),
        }
    }
}

impl std::error::Error for ChannelError {}

impl From<std::io::Error> for ChannelError {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            ChannelError::Truncated
        } else {
            ChannelError::Io(error.to_string())
        }
    }
}

impl From<snow::Error> for ChannelError {
    fn from(error: snow::Error) -> Self {
        ChannelError::Handshake(error.to_string())
    }
}
