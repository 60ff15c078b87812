//! Record and frame decoding under arbitrary input. The first byte picks the mode:
//! 0: the bytes are a record stream for a receiving channel;
//! 1: the bytes are a frame (kind byte, then a message) for `Frame::decode`;
//! 2: a valid stream of two messages is mutated at positions the input chooses, then received:
//!    every message released must be one that was sent.
#![no_main]

use ccchannel::testing::channel_with_keys;
use ccchannel::Frame;
use libfuzzer_sys::fuzz_target;
use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

const FIRST: &[u8] = &[7u8; 1500];
const SECOND: &[u8] = b"second message";

async fn receive(stream_bytes: Vec<u8>) -> Vec<Vec<u8>> {
    let (mut feed, stream) = duplex(1 << 20);
    let mut released = Vec::new();
    let writer = async move {
        let _ = feed.write_all(&stream_bytes).await;
        drop(feed);
    };
    let reader = async {
        let mut receiver = channel_with_keys(stream, [2; 32], [1; 32], 1 << 20);
        while let Ok(Some(frame)) = receiver.recv().await {
            released.push(frame.payload().to_vec());
        }
    };
    tokio::join!(writer, reader);
    released
}

async fn valid_stream() -> Vec<u8> {
    let (writer, mut tap) = duplex(1 << 20);
    let mut sender = channel_with_keys(writer, [1; 32], [2; 32], 1 << 20);
    sender.send(&Frame::bytes(FIRST)).await.unwrap();
    sender.send(&Frame::bytes(SECOND)).await.unwrap();
    sender.close().await.unwrap();
    drop(sender);
    let mut bytes = Vec::new();
    tap.read_to_end(&mut bytes).await.unwrap();
    bytes
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    match mode % 3 {
        0 => {
            runtime.block_on(receive(rest.to_vec()));
        }
        1 => {
            if let Some((&kind, message)) = rest.split_first() {
                let _ = Frame::decode(kind, message.to_vec());
            }
        }
        _ => runtime.block_on(async {
            let mut stream = valid_stream().await;
            // pairs of (position, xor mask); a zero mask leaves the byte alone
            for pair in rest.chunks_exact(3) {
                let at = u16::from_be_bytes([pair[0], pair[1]]) as usize % stream.len();
                stream[at] ^= pair[2];
            }
            if rest.len() % 3 == 1 {
                stream.truncate(rest[rest.len() - 1] as usize * 8 % stream.len());
            }
            let released = receive(stream).await;
            assert!(released.len() <= 2, "more messages than were sent");
            for (index, message) in released.iter().enumerate() {
                assert_eq!(message.as_slice(), if index == 0 { FIRST } else { SECOND }, "a tampered message was released");
            }
        }),
    }
});
