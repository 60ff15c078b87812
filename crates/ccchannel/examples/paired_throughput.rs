//! Paired on CPU time: one core's AEAD seal+open of 1 MiB (ccchannel-bench's floor loop) against
//! the channel moving 1 MiB messages one way over a tokio duplex pipe (4 MiB deep unless told, as in
//! ccchannel-bench), sent borrowed
//! (`send(&Frame::bytes(..))`: copied into the send buffer, sealed there) and in place
//! (`send_in_place`: sealed in the sender's buffer), received with `recv_into`. The three alternate
//! inside one process, in a rotating order, each timed on this thread's CPU time
//! (`/proc/thread-self/schedstat`), so that a shared, loaded machine's preemptions count against
//! none of them; the figures are per-round ratios and their medians.
//!
//!     cargo run --release -p ccchannel --example paired_throughput [rounds] [MiB per round] [pipe KiB]

use ccchannel::testing::channel_with_keys;
use ccchannel::{Cipher, Frame};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey};
use tokio::io::duplex;

const MIB: usize = 1 << 20;

/// Nanoseconds this thread has run on a CPU (Linux).
fn cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat (Linux)");
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("run time")
}

fn aead(messages: usize) -> f64 {
    let key = LessSafeKey::new(UnboundKey::new(Cipher::for_this_cpu().algorithm(), &[7u8; 32]).unwrap());
    let mut buffer = vec![0x42u8; MIB];
    let start = cpu_ns();
    for counter in 0..messages as u64 {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&counter.to_be_bytes());
        let tag = key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buffer)
            .unwrap();
        let mut sealed = std::mem::take(&mut buffer);
        sealed.extend_from_slice(tag.as_ref());
        let len = key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed)
            .unwrap()
            .len();
        sealed.truncate(len);
        buffer = sealed;
    }
    (messages * MIB) as f64 / ((cpu_ns() - start) as f64 / 1e9) / 1e6
}

async fn channel(messages: usize, in_place: bool, pipe: usize) -> f64 {
    let (a, b) = duplex(pipe);
    let mut sender = channel_with_keys(a, [1; 32], [2; 32], 64 * MIB);
    let mut receiver = channel_with_keys(b, [2; 32], [1; 32], 64 * MIB);
    let mut message = vec![0xA5u8; MIB];
    let start = cpu_ns();
    let sent = async {
        for _ in 0..messages {
            if in_place {
                sender.send_in_place(&mut message).await.unwrap();
            } else {
                sender.send(&Frame::bytes(&message)).await.unwrap();
            }
        }
    };
    let received = async {
        let mut buffer = Vec::with_capacity(MIB);
        for _ in 0..messages {
            receiver.recv_into(&mut buffer).await.unwrap();
            assert_eq!(buffer.len(), MIB);
        }
    };
    tokio::join!(sent, received);
    (messages * MIB) as f64 / ((cpu_ns() - start) as f64 / 1e9) / 1e6
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[(n - 1) / 2] + values[n / 2]) / 2.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(15, |a| a.parse().expect("rounds"));
    let messages: usize = args.next().map_or(64, |a| a.parse().expect("MiB per round"));
    let pipe: usize = args.next().map_or(4096, |a| a.parse::<usize>().expect("pipe KiB")) << 10;
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (mut floor, mut borrowed, mut in_place) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (mut f, mut b, mut i) = (0.0, 0.0, 0.0);
        for step in 0..3 {
            match (round + step) % 3 {
                0 => f = aead(messages),
                1 => b = runtime.block_on(channel(messages, false, pipe)),
                _ => i = runtime.block_on(channel(messages, true, pipe)),
            }
        }
        println!(
            "round {round}: AEAD {f:.0} MB/s, borrowed {b:.0} ({:.3}), in place {i:.0} ({:.3})",
            b / f,
            i / f
        );
        floor.push(f);
        borrowed.push(b / f);
        in_place.push(i / f);
    }
    let ratio: Vec<f64> = in_place.iter().zip(&borrowed).map(|(i, b)| i / b).collect();
    println!(
        "median of {rounds} rounds: AEAD {:.0} MB/s; borrowed / AEAD {:.3}; in place / AEAD {:.3}; in place / borrowed {:.3}",
        median(floor),
        median(borrowed),
        median(in_place),
        median(ratio)
    );
}
