//! Fuzz frame decoding (bytes and tensors with dtype and shape) on already-authenticated messages.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((kind, rest)) = data.split_first() {
        let _ = ccchannel::Frame::decode(*kind % 3, rest.to_vec());
        if rest.len() > 2 {
            let split = (rest[0] as usize) % rest.len();
            let _ = ccchannel::Frame::from_parts(*kind % 3, rest[..split].to_vec(), rest[split..].to_vec());
        }
    }
});
