//! The command line, declared with clap's derive: the benchmark's options, and the Noise
//! interoperability responder as a subcommand. A bad name or number ends the program with exit
//! status 2 and one line on stderr, as before clap.

use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};

/// The transports compared; parsed from the command line, so an unknown name is an error rather
/// than a silent fall-through to one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Plain,
    Tls,
    SecureChannel,
}

impl Transport {
    pub const ALL: [Transport; 3] = [Transport::Plain, Transport::Tls, Transport::SecureChannel];

    pub fn name(self) -> &'static str {
        match self {
            Transport::Plain => "plain",
            Transport::Tls => "tls",
            Transport::SecureChannel => "securechannel",
        }
    }
}

/// What carries the bytes between the two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pipe {
    /// tokio's in-process duplex pipe: no kernel, the channel's own cost
    Duplex,
    /// loopback TCP with TCP_NODELAY
    Tcp,
}

impl Pipe {
    pub const ALL: [Pipe; 2] = [Pipe::Duplex, Pipe::Tcp];

    pub fn name(self) -> &'static str {
        match self {
            Pipe::Duplex => "duplex",
            Pipe::Tcp => "tcp",
        }
    }
}

/// `all`, or one name: what `--transport` and `--pipe` take.
#[derive(Debug, Clone)]
pub struct Selection<T>(Vec<T>);

impl<T: Copy> Selection<T> {
    pub fn items(&self) -> &[T] {
        &self.0
    }
}

fn select<T: Copy>(name: &str, all: &[T], name_of: fn(T) -> &'static str, what: &str) -> Result<Selection<T>, String> {
    if name == "all" {
        return Ok(Selection(all.to_vec()));
    }
    let names: Vec<&str> = all.iter().map(|&item| name_of(item)).collect();
    all.iter()
        .find(|&&item| name_of(item) == name)
        .map(|&item| Selection(vec![item]))
        .ok_or_else(|| format!("unknown {what} {name}: {} or all", names.join(", ")))
}

fn parse_transports(name: &str) -> Result<Selection<Transport>, String> {
    select(name, &Transport::ALL, Transport::name, "transport")
}

fn parse_pipes(name: &str) -> Result<Selection<Pipe>, String> {
    select(name, &Pipe::ALL, Pipe::name, "pipe")
}

/// Payload sizes in bytes, comma-separated (one value, so a later `--sizes` replaces an earlier one).
#[derive(Debug, Clone)]
pub struct Sizes(pub Vec<usize>);

fn parse_sizes(list: &str) -> Result<Sizes, String> {
    list.split(',')
        .map(|s| s.trim().parse::<usize>().map_err(|_| format!("bad size {s}")))
        .collect::<Result<_, _>>()
        .map(Sizes)
}

/// Transport benchmark: plaintext, ccchannel and TLS 1.3 (rustls); prints one JSON document.
#[derive(Debug, Parser)]
#[command(name = "ccchannel-bench", args_override_self = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// all, plain, tls or securechannel
    #[arg(long = "transport", value_name = "NAME", default_value = "all", value_parser = parse_transports)]
    pub transports: Selection<Transport>,
    /// all, duplex or tcp
    #[arg(long = "pipe", value_name = "NAME", default_value = "all", value_parser = parse_pipes)]
    pub pipes: Selection<Pipe>,
    /// handshakes timed per transport and pipe
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub handshakes: usize,
    /// fewer iterations (tests, quick plans)
    #[arg(long)]
    pub quick: bool,
    /// payload sizes in bytes, comma-separated
    #[arg(long, value_name = "A,B,...", default_value = "1536,4096,393216,1048576", value_parser = parse_sizes)]
    pub sizes: Sizes,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A Noise NN responder on stdin/stdout, for interoperability tests with another implementation
    InteropResponder {
        /// AESGCM or ChaChaPoly
        #[arg(default_value = "AESGCM")]
        cipher: String,
    },
}

/// The command line of this process; help and version print and exit 0, anything else that clap
/// refuses prints one line (what was wrong, where to look) and exits 2.
pub fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            eprintln!("ccchannel-bench: {}", one_line(&error));
            std::process::exit(2);
        }
    }
}

/// clap's message without its "error: " prefix, usage and tips: the first line, and where to look.
fn one_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    format!("{} (see --help)", first.trim_start_matches("error: ").trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_from(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ccchannel-bench").chain(args.iter().copied()))
    }

    #[test]
    fn the_defaults_are_every_transport_and_pipe_and_four_sizes() {
        let cli = parse_from(&[]).unwrap();
        assert_eq!(cli.transports.items(), Transport::ALL);
        assert_eq!(cli.pipes.items(), Pipe::ALL);
        assert_eq!(cli.handshakes, 1000);
        assert!(!cli.quick);
        assert_eq!(cli.sizes.0, [1536, 4096, 384 * 1024, 1024 * 1024]);
        assert!(cli.command.is_none());
    }

    #[test]
    fn one_name_selects_one_and_the_last_repetition_wins() {
        let cli = parse_from(&["--transport", "tls", "--pipe", "tcp", "--sizes", "1, 2", "--sizes", "7"]).unwrap();
        assert_eq!(cli.transports.items(), [Transport::Tls]);
        assert_eq!(cli.pipes.items(), [Pipe::Tcp]);
        assert_eq!(cli.sizes.0, [7]);
        let cli = parse_from(&["--transport", "plain", "--transport", "securechannel"]).unwrap();
        assert_eq!(cli.transports.items(), [Transport::SecureChannel]);
    }

    #[test]
    fn an_unknown_name_is_one_line_that_names_it_and_the_choices() {
        let error = parse_from(&["--transport", "securechanel"]).unwrap_err();
        let line = one_line(&error);
        assert!(
            line.contains("unknown transport securechanel: plain, tls, securechannel or all"),
            "{line}"
        );
        assert!(!line.contains('\n'));
        assert_eq!(error.exit_code(), 2);
        let line = one_line(&parse_from(&["--pipe", "udp"]).unwrap_err());
        assert!(line.contains("unknown pipe udp: duplex, tcp or all"), "{line}");
        let line = one_line(&parse_from(&["--sizes", "1,x"]).unwrap_err());
        assert!(line.contains("bad size x"), "{line}");
        let line = one_line(&parse_from(&["--frobnicate"]).unwrap_err());
        assert!(
            line.contains("--frobnicate") && line.ends_with("(see --help)"),
            "{line}"
        );
    }

    #[test]
    fn the_interop_responder_takes_an_optional_cipher() {
        let cli = parse_from(&["interop-responder"]).unwrap();
        assert!(matches!(cli.command, Some(Command::InteropResponder { cipher }) if cipher == "AESGCM"));
        let cli = parse_from(&["interop-responder", "ChaChaPoly"]).unwrap();
        assert!(matches!(cli.command, Some(Command::InteropResponder { cipher }) if cipher == "ChaChaPoly"));
    }
}
