//! `ccchannel-proxy`: carry an application's TCP connections through the attested secure channel.
//!
//! ```text
//! ccchannel-proxy client --listen 127.0.0.1:0 --server AGG:PORT  --evidence mock:mock-tdx:image --accept-technology mock-tdx
//! ccchannel-proxy server --listen 0.0.0.0:0   --target 127.0.0.1:SERVICE --evidence ... --accept-technology ...
//! ```
//! Prints one JSON line `{"ready":"<address it listens on>"}` once listening, and its counters as a
//! JSON line when stopped with SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ccchannel::Policy;
use ccchannel_proxy::{client, server, EvidenceSource, ProxySettings, Stats};
use tokio::net::TcpListener;

const USAGE: &str = "usage: ccchannel-proxy client --listen ADDR --server ADDR | server --listen ADDR --target ADDR
  common options: --evidence mock:<technology>:<measurement-label>|tsm   (this side's evidence)
                  --accept-technology NAME (repeatable; what the peer must be)
                  [--accept-measurement HEX] [--max-age-s SECONDS (default 300)]";

struct Args {
    role: String,
    listen: SocketAddr,
    peer: SocketAddr,
    settings: ProxySettings,
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let role = argv.first().cloned().ok_or("missing role (client or server)")?;
    if role != "client" && role != "server" {
        return Err(format!("unknown role '{role}': use client or server"));
    }
    let peer_flag = if role == "client" { "--server" } else { "--target" };
    let (mut listen, mut peer, mut evidence) = (None, None, None);
    let (mut technologies, mut measurement, mut max_age) = (Vec::new(), None, 300u64);
    let mut rest = argv[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => {
                listen = Some(
                    value
                        .parse::<SocketAddr>()
                        .map_err(|e| format!("--listen {value}: {e}"))?,
                )
            }
            f if f == peer_flag => peer = Some(value.parse::<SocketAddr>().map_err(|e| format!("{f} {value}: {e}"))?),
            "--evidence" => evidence = Some(EvidenceSource::parse(value)?),
            "--accept-technology" => technologies.push(value.clone()),
            "--accept-measurement" => measurement = Some(value.clone()),
            "--max-age-s" => max_age = value.parse().map_err(|e| format!("--max-age-s {value}: {e}"))?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if technologies.is_empty() {
        return Err("give at least one --accept-technology (what the peer's evidence must show)".into());
    }
    Ok(Args {
        role,
        listen: listen.ok_or("--listen is required")?,
        peer: peer.ok_or_else(|| format!("{peer_flag} is required"))?,
        settings: ProxySettings {
            evidence: evidence.ok_or("--evidence is required")?,
            policy: Policy {
                technologies,
                measurement,
                max_age: Duration::from_secs(max_age),
            },
        },
    })
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse(&argv) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("ccchannel-proxy: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ccchannel-proxy: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::bind(args.listen).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("ccchannel-proxy: cannot listen on {}: {e}", args.listen);
                return ExitCode::FAILURE;
            }
        };
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let cipher = args.settings.channel_config().cipher.noise_name();
        println!(
            "{{\"ready\":\"{local}\",\"role\":\"{}\",\"cipher\":\"{cipher}\"}}",
            args.role
        );
        let stats = Arc::new(Stats::default());
        let work = {
            let stats = stats.clone();
            async move {
                if args.role == "client" {
                    client(listener, args.peer, args.settings, stats).await
                } else {
                    server(listener, args.peer, args.settings, stats).await
                }
            }
        };
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(e) => {
                eprintln!("ccchannel-proxy: cannot watch SIGTERM: {e}");
                return ExitCode::FAILURE;
            }
        };
        tokio::select! {
            _ = work => {}
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        println!("{}", stats.json());
        ExitCode::SUCCESS
    })
}
