//! Typed messages: raw bytes, or a tensor (dtype and shape) for embeddings and activations.

use std::borrow::Cow;

use crate::error::{ChannelError, ProtocolViolation};
pub use crate::wire::{DType, KIND_BYTES, KIND_TENSOR, MAX_DIMS};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Bytes(Cow<'a, [u8]>),
    Tensor {
        dtype: DType,
        shape: Vec<u64>,
        data: Cow<'a, [u8]>,
    },
}

impl<'a> Frame<'a> {
    pub fn bytes(data: &'a [u8]) -> Frame<'a> {
        Frame::Bytes(Cow::Borrowed(data))
    }

    /// A tensor frame; the data length must match the shape and dtype.
    pub fn tensor(dtype: DType, shape: &[u64], data: &'a [u8]) -> Result<Frame<'a>, ChannelError> {
        check_tensor(dtype, shape, data.len())?;
        Ok(Frame::Tensor {
            dtype,
            shape: shape.to_vec(),
            data: Cow::Borrowed(data),
        })
    }

    pub fn payload(&self) -> &[u8] {
        match self {
            Frame::Bytes(data) => data,
            Frame::Tensor { data, .. } => data,
        }
    }

    /// (kind, header, data): the header travels in front of the data in the first record.
    pub(crate) fn encode_parts(&self) -> (u8, Vec<u8>, &[u8]) {
        match self {
            Frame::Bytes(data) => (KIND_BYTES, Vec::new(), data),
            Frame::Tensor { dtype, shape, data } => {
                let mut header = Vec::with_capacity(2 + 8 * shape.len());
                header.push(*dtype as u8);
                header.push(shape.len() as u8);
                for dim in shape {
                    header.extend_from_slice(&dim.to_be_bytes());
                }
                (KIND_TENSOR, header, data)
            }
        }
    }

    /// The payload, moved out of the frame.
    pub fn into_payload(self) -> Vec<u8> {
        match self {
            Frame::Bytes(data) => data.into_owned(),
            Frame::Tensor { data, .. } => data.into_owned(),
        }
    }

    /// Build a frame from a reassembled message: for tensors the (separately sent) header and the data.
    pub fn from_parts(kind: u8, tensor_header: Vec<u8>, data: Vec<u8>) -> Result<Frame<'static>, ChannelError> {
        match kind {
            KIND_BYTES if tensor_header.is_empty() => Ok(Frame::Bytes(Cow::Owned(data))),
            KIND_TENSOR => {
                let (dtype, shape) = parse_tensor_header(&tensor_header)?;
                check_tensor(dtype, &shape, data.len())?;
                Ok(Frame::Tensor {
                    dtype,
                    shape,
                    data: Cow::Owned(data),
                })
            }
            other => Err(ChannelError::Protocol(ProtocolViolation::UnknownFrameKind(other))),
        }
    }

    /// Decode a whole message (tensor header followed by data) into a frame.
    pub fn decode(kind: u8, message: Vec<u8>) -> Result<Frame<'static>, ChannelError> {
        match kind {
            KIND_BYTES => Ok(Frame::Bytes(Cow::Owned(message))),
            KIND_TENSOR => {
                // the header's length follows from its dimension count; a message shorter than that
                // (or without a count) is what the header parser refuses as malformed
                let ndim = message.get(1).map_or(0, |&n| n as usize);
                let header = message.len().min(2 + 8 * ndim);
                let (dtype, shape) = parse_tensor_header(&message[..header])?;
                check_tensor(dtype, &shape, message.len() - header)?;
                let data = message[header..].to_vec();
                Ok(Frame::Tensor {
                    dtype,
                    shape,
                    data: Cow::Owned(data),
                })
            }
            other => Err(ChannelError::Protocol(ProtocolViolation::UnknownFrameKind(other))),
        }
    }
}

fn parse_tensor_header(header: &[u8]) -> Result<(DType, Vec<u64>), ChannelError> {
    if header.len() < 2 {
        return Err(ChannelError::Protocol(ProtocolViolation::MalformedTensorHeader));
    }
    let dtype =
        DType::from_code(header[0]).ok_or(ChannelError::Protocol(ProtocolViolation::UnknownDType(header[0])))?;
    let ndim = header[1] as usize;
    if ndim > MAX_DIMS {
        return Err(ChannelError::Protocol(ProtocolViolation::TooManyDimensions(ndim)));
    }
    if header.len() != 2 + 8 * ndim {
        return Err(ChannelError::Protocol(ProtocolViolation::MalformedTensorHeader));
    }
    let shape = (0..ndim)
        .map(|i| u64::from_be_bytes(header[2 + 8 * i..10 + 8 * i].try_into().expect("8 bytes")))
        .collect();
    Ok((dtype, shape))
}

fn check_tensor(dtype: DType, shape: &[u64], len: usize) -> Result<(), ChannelError> {
    if shape.len() > MAX_DIMS {
        return Err(ChannelError::Protocol(ProtocolViolation::TooManyDimensions(
            shape.len(),
        )));
    }
    let elements = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let expected = elements.and_then(|e| e.checked_mul(dtype.size() as u64));
    match expected {
        Some(bytes) if bytes == len as u64 => Ok(()),
        _ => Err(ChannelError::Protocol(ProtocolViolation::TensorSizeMismatch {
            len,
            shape: shape.to_vec(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn violation(kind: u8, message: Vec<u8>) -> ProtocolViolation {
        match Frame::decode(kind, message) {
            Err(ChannelError::Protocol(violation)) => violation,
            other => panic!("expected a protocol violation, got {other:?}"),
        }
    }

    /// dtype f32, one dimension of 2: the header of an 8-byte tensor
    fn header_f32_2() -> Vec<u8> {
        [vec![0, 1], 2u64.to_be_bytes().to_vec()].concat()
    }

    #[test]
    fn decode_reads_a_tensor_header_and_its_data() {
        let message = [header_f32_2(), vec![7; 8]].concat();
        let frame = Frame::decode(KIND_TENSOR, message).unwrap();
        assert_eq!(frame, Frame::tensor(DType::F32, &[2], &[7; 8]).unwrap());
        assert_eq!(
            Frame::decode(KIND_BYTES, b"raw".to_vec()).unwrap(),
            Frame::bytes(b"raw")
        );
    }

    #[test]
    fn decode_names_each_malformed_tensor() {
        use ProtocolViolation as V;
        assert_eq!(violation(KIND_TENSOR, vec![]), V::MalformedTensorHeader);
        assert_eq!(violation(KIND_TENSOR, vec![0]), V::MalformedTensorHeader);
        assert_eq!(violation(KIND_TENSOR, vec![99, 9]), V::UnknownDType(99));
        assert_eq!(violation(KIND_TENSOR, vec![0, 9]), V::TooManyDimensions(9));
        // fewer shape bytes than the dimension count announces
        assert_eq!(violation(KIND_TENSOR, vec![0, 2, 0, 0, 0]), V::MalformedTensorHeader);
        assert_eq!(
            violation(KIND_TENSOR, [header_f32_2(), vec![0; 4]].concat()),
            V::TensorSizeMismatch { len: 4, shape: vec![2] }
        );
        assert_eq!(violation(7, vec![0; 4]), V::UnknownFrameKind(7));
    }
}
