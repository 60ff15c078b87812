//! Errors as types: every failure says what went wrong; none panics on peer input.

use std::fmt;

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
    /// A well-authenticated record that breaks the framing rules.
    Protocol(String),
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
            ChannelError::Protocol(why) => write!(f, "protocol error: {why}"),
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
