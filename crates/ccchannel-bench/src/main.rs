//! Transport benchmark: plaintext, ccchannel and TLS 1.3 (rustls) in one run on one machine.
//!
//! Measures handshake latency (per-handshake samples; mock attestation for ccchannel), request /
//! response round trip and one-way throughput for 1536 B, 4 KiB, 384 KiB and 1 MiB payloads over an
//! in-process duplex pipe and loopback TCP, and the raw AEAD seal+open speed of one core (the ceiling
//! the channel should approach). Everything runs on one thread, so both ends share a core, as the
//! AEAD ceiling does. Prints one JSON document, [`result::BenchReport`].
//!
//! usage: ccchannel-bench [--transport all|plain|tls|securechannel] [--pipe all|duplex|tcp]
//!                        [--handshakes N] [--quick] [--sizes 1536,4096,...]
//!        ccchannel-bench interop-responder [AESGCM|ChaChaPoly]   (Noise NN responder on stdin/stdout)
//!
//! The modules: `cli` (the command line), `endpoints` (the transports behind one message
//! interface), `measure` (handshake, round trip, throughput), `floors` (AEAD, X25519, Noise alone,
//! evidence verification), `targets`, `stats` (the latency summary), `result` (the printed
//! document: the contract with the Python workload), `interop` (the Noise responder).

mod cli;
mod endpoints;
mod floors;
mod interop;
mod measure;
mod result;
mod stats;
mod targets;

use ccchannel::Cipher;

use crate::cli::{Cli, Command, Transport};
use crate::endpoints::{tls_negotiated, Peers};
use crate::result::BenchReport;

/// Every measurement the options ask for, in the order they always ran: per pipe and transport the
/// handshakes, then each size's round trip and throughput; then the one-core figures.
async fn run(options: &Cli) -> BenchReport {
    let peers = Peers::new();
    let (mut handshake, mut rtt, mut throughput) = (Vec::new(), Vec::new(), Vec::new());
    for &pipe in options.pipes.items() {
        for &transport in options.transports.items() {
            if transport != Transport::Plain {
                handshake.push(measure::bench_handshakes(transport, pipe, options.handshakes, &peers).await);
            }
            for &size in &options.sizes.0 {
                rtt.push(measure::bench_rtt(transport, pipe, size, options.quick, &peers).await);
                throughput.push(measure::bench_throughput(transport, pipe, size, options.quick, &peers).await);
            }
        }
    }
    let aead = floors::bench_aead(options.quick);
    let x25519 = floors::bench_x25519(options.quick);
    let targets = targets::targets(&handshake, &rtt, &throughput, &aead, &x25519);
    let snow_nn_handshake = floors::bench_snow_nn(options.quick);
    let ran = |transport| options.transports.items().contains(&transport);
    let tls = match ran(Transport::Tls) {
        true => Some(tls_negotiated(&peers).await),
        false => None,
    };
    let verify = ran(Transport::SecureChannel).then(|| floors::bench_verify(options.quick));
    BenchReport {
        tool: "ccchannel-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        cipher: format!("{:?}", Cipher::for_this_cpu()),
        handshake,
        rtt,
        throughput,
        aead,
        x25519,
        targets,
        snow_nn_handshake,
        verify,
        tls,
    }
}

fn main() {
    let options = cli::parse();
    if let Some(Command::InteropResponder { cipher }) = &options.command {
        if let Err(error) = interop::interop_responder(cipher) {
            eprintln!("ccchannel-bench: interop: {error}");
            std::process::exit(1);
        }
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = runtime.block_on(run(&options));
    // a missed target is a finding of this run, not a failure of the program: said on stderr, the
    // document on stdout carries it as `met: false`
    for (name, check) in &report.targets {
        if !check.met {
            eprintln!(
                "ccchannel-bench: MISSED {name}: {:.3} (wanted {})",
                check.value, check.target
            );
        }
    }
    println!("{}", serde_json::to_string(&report).expect("JSON"));
}
