//! The wire vocabulary: record types, frame kinds, tensor dtypes and the size limits, in one leaf
//! module that imports nothing from the crate. The error types name a record type and the tensor
//! limit, the frame and record layers encode them: with the constants here, every other module
//! depends on this one and none of them on each other in a circle.

/// The type byte of a record's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    /// first record of a message
    Start = 1,
    /// the next chunk of a message
    Continue = 2,
    /// attestation evidence during the handshake's attestation step
    Attest = 3,
    /// the sender switched to the next key after this record
    Rekey = 4,
    /// the sender will send nothing more
    Close = 5,
}

/// A type byte that names no record type (the header is authenticated, so this is tampering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownRecordType(pub u8);

impl TryFrom<u8> for RecordType {
    type Error = UnknownRecordType;

    fn try_from(value: u8) -> Result<Self, Self::Error> {
        Ok(match value {
            1 => RecordType::Start,
            2 => RecordType::Continue,
            3 => RecordType::Attest,
            4 => RecordType::Rekey,
            5 => RecordType::Close,
            other => return Err(UnknownRecordType(other)),
        })
    }
}

/// Largest plaintext chunk in one record; larger messages are fragmented.
pub const MAX_CHUNK: usize = 256 * 1024;
/// The AEAD tag after each record's ciphertext (both ciphers use 16 bytes).
pub(crate) const TAG_LEN: usize = 16;
/// Every record's header: `u32 BE ciphertext length || type (1 byte)`.
pub(crate) const BASE_HEADER: usize = 4 + 1;
/// What a START record's header adds: `frame kind (1) || total message length (u64 BE)`.
pub(crate) const START_EXTRA: usize = 1 + 8;
/// Largest ciphertext in one record (chunk + tag).
pub const MAX_RECORD: usize = MAX_CHUNK + TAG_LEN;

/// The frame kind of a message of raw bytes.
pub const KIND_BYTES: u8 = 0;
/// The frame kind of a tensor: dtype and shape travel in front of the data.
pub const KIND_TENSOR: u8 = 1;
/// Most dimensions a tensor may have.
pub const MAX_DIMS: usize = 8;

/// A tensor's element type, with its code on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum DType {
    F32 = 0,
    F16 = 1,
    BF16 = 2,
    I64 = 3,
    I32 = 4,
    U8 = 5,
    F64 = 6,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I64 | DType::F64 => 8,
            DType::U8 => 1,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<DType> {
        Some(match code {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::BF16,
            3 => DType::I64,
            4 => DType::I32,
            5 => DType::U8,
            6 => DType::F64,
            _ => return None,
        })
    }
}
