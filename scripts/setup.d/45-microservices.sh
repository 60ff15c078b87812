#!/usr/bin/env bash
# microservices: nginx, Redis, memcached, PostgreSQL, wrk (Debian), oha (crates.io), the Go application tier
# The Debian packages' services are not used (ccbench starts its own servers on free loopback ports);
# oha is compiled from crates.io once (several minutes on 2 cores), then found in ~/.cargo/bin.
apt_install nginx-light redis-server memcached postgresql wrk openssl
[ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
if ! command -v oha >/dev/null; then
  command -v cargo >/dev/null || die "cargo is not installed (oha is built from crates.io): install Rust with rustup (https://rustup.rs), then re-run"
  command -v cc >/dev/null || apt_install gcc
  command -v cmake >/dev/null || apt_install cmake make   # aws-lc-sys (rustls' crypto) builds with cmake
  # pinned: its JSON summary and flags are what the workload parses
  log "cargo install --locked oha 1.16.0 (the open-loop load generator; many minutes on 2 CPUs the first time)"
  cargo install --quiet --locked oha --version 1.16.0 || die "cargo install oha failed"
fi
# the machine's Go (any release >= 1.19); Debian 12's golang-go when there is none
[ -x /usr/local/go/bin/go ] && case ":$PATH:" in *":/usr/local/go/bin:"*) ;; *) export PATH="/usr/local/go/bin:$PATH" ;; esac
command -v go >/dev/null || apt_install golang-go
need_checkout services/socialnet "the microservices application tier"
socialnet="$ROOT/services/socialnet"
if [ ! -x "$socialnet/bin/socialnet" ] || [ -n "$(find "$socialnet" -name '*.go' -newer "$socialnet/bin/socialnet" -o -name go.sum -newer "$socialnet/bin/socialnet")" ]; then
  log "building the microservices application tier (go build; modules from the Go module proxy)"
  (cd "$socialnet" && GOFLAGS=-mod=readonly go build -o bin/socialnet .) || die "the Go application tier in services/socialnet did not build"
fi
