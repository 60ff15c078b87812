//! ccmech: the mechanism probes no packaged tool measures (see the modules); each subcommand prints
//! JSON on stdout, read by ccbench's `mechanisms` workload: `exits` one line per case as it finishes
//! (a first line saying how they were measured), the others one document.
//!
//! ccmech exits  [--iterations N] [--batches N]   (reads /proc/cpuinfo and the lockdown file under
//!                                                 $CCMECH_ROOT where set: a fake tree for tests)
//! ccmech memory --pages 4k|2m [--array-bytes N] [--chase-bytes N] [--passes N]
//! ccmech touch  --pages 4k|2m [--bytes N]
//! ccmech wake   --vcpus N [--round-trips N] [--rounds N] [--batches N]
//! ccmech --version                               (`ccmech <version>`: the crate's, recorded by ccbench)

mod exits;
mod memory;
mod procfs;
mod region;
mod wake;

use std::collections::HashMap;
use std::process::ExitCode;

use region::Pages;

struct Options(HashMap<String, String>);

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut map = HashMap::new();
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {flag:?}"))?;
            let value = rest.next().ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_string(), value.clone());
        }
        Ok(Options(map))
    }

    fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.0.get(name) {
            None => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(value) if value > 0 => Ok(value),
                _ => Err(format!("--{name} must be a positive integer, not {text:?}")),
            },
        }
    }

    fn pages(&self) -> Result<Pages, String> {
        Pages::parse(self.0.get("pages").map(String::as_str).unwrap_or("4k"))
    }
}

fn run(args: &[String]) -> Result<serde_json::Value, String> {
    let (command, rest) = args
        .split_first()
        .ok_or("usage: ccmech exits|memory|touch|wake [--option value ...] | --version")?;
    let options = Options::parse(rest)?;
    match command.as_str() {
        "exits" => {
            let (iterations, count) = (options.number("iterations", 100_000)?, options.number("batches", 5)?);
            exits::exits(&mut std::io::stdout().lock(), iterations, count as usize)?;
            Ok(serde_json::Value::Null)
        }
        "memory" => memory::memory(
            options.pages()?,
            options.number("array-bytes", 256 << 20)? as usize,
            options.number("chase-bytes", 256 << 20)? as usize,
            options.number("passes", 3)? as usize,
        ),
        "touch" => memory::first_touch(options.pages()?, options.number("bytes", 256 << 20)? as usize),
        "wake" => wake::wake(
            options.number("vcpus", 2)? as usize,
            options.number("round-trips", 5_000)?,
            options.number("rounds", 2_000)?,
            options.number("batches", 5)? as usize,
        ),
        other => Err(format!("unknown subcommand {other:?}: exits, memory, touch or wake")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("ccmech {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(document) => {
            if !document.is_null() {
                println!("{document}");
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("ccmech: {message}");
            ExitCode::from(2)
        }
    }
}
