//! ccchannel: an attested secure channel for confidential ML traffic.
//!
//! * Handshake: Noise NN (identity from attestation) or XX (static keys too), 25519, AES-GCM or
//!   ChaCha20-Poly1305 (by CPU), SHA-256, through the `snow` crate; see [`handshake`].
//! * Attestation: evidence bound to the final handshake hash (and the sender's static key), from a
//!   [`attestation::MockProvider`] or Linux configfs-tsm ([`attestation::TsmProvider`]); verified
//!   against a [`attestation::Policy`] that rejects with a typed [`RejectReason`].
//! * Records: length-prefixed AEAD records (ring), implicit strictly increasing nonces, messages
//!   fragmented and reassembled, a hard maximum message size checked before allocation, Noise
//!   REKEY after a configurable amount of data, an explicit close, typed frames; see [`record`].

pub mod attestation;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod record;
mod ring_x25519;
pub mod wire;

pub use attestation::{AttestationProvider, Evidence, MockProvider, Policy, TsmProvider, VendorCheck};
pub use error::{ChannelError, ProtocolViolation, RejectReason};
pub use frame::{DType, Frame};
pub use handshake::{accept, connect, Config, Pattern, StaticKey};
pub use record::{Channel, Cipher, RecordType};

/// Entry points for fuzzing and property tests: a receiving channel keyed directly, without a
/// handshake. Not for production use.
#[doc(hidden)]
pub mod testing {
    use tokio::io::{AsyncRead, AsyncWrite};

    use crate::record::{Channel, Cipher, Direction};

    pub fn channel_with_keys<S: AsyncRead + AsyncWrite + Unpin>(
        stream: S,
        send: [u8; 32],
        recv: [u8; 32],
        max_message: usize,
    ) -> Channel<S> {
        let cipher = Cipher::AesGcm;
        Channel::new(
            stream,
            Direction::new(cipher, send),
            Direction::new(cipher, recv),
            max_message,
            1 << 30,
            vec![0; 32],
        )
    }
}
