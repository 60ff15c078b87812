#!/usr/bin/env bash
# federated learning (seed 001): OpenFL 1.9 in its own environment <venv>/federated reusing the project's PyTorch; ccchannel-proxy
# OpenFL 1.9 crashes with numpy >= 2.4 while the project's environment has a newer numpy, so OpenFL
# gets its own small environment (about 180 MB, under a minute). It sees the project's packages
# through a .pth file placed after its own site-packages: its numpy < 2.4 wins, and PyTorch (a
# multi-GB CUDA build) is reused from the project's environment instead of installed twice.
[ -z "$CCBENCH_SETUP_HOST" ] || die "OpenFL's own environment is made from PyPI (pip), which fleet hosts are not given: set it up on the host with scripts/setup.sh --with federated"
FED_VENV="$VENV/federated"
FED_PY="$FED_VENV/bin/python"
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  log "federated: skipped (OpenFL reuses the project's PyTorch: run with --with ml first)"
else
  if "$FED_PY" -c 'import numpy, openfl, torchvision, mlxtend; assert tuple(map(int, numpy.__version__.split(".")[:2])) < (2, 4)' >/dev/null 2>&1; then
    log "federated: OpenFL already installed in $FED_VENV"
  else
    log "federated: making $FED_VENV (OpenFL 1.9, numpy < 2.4, torchvision, mlxtend; PyTorch reused)"
    [ -x "$FED_PY" ] || "$PY" -m venv "$FED_VENV" || die "could not create $FED_VENV"
    shared_site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    own_site=$("$FED_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$shared_site" > "$own_site/ccbench-shared-venv.pth"
    torch_version=$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')
    constraints="$FED_VENV/constraints.txt"
    echo "torch==$torch_version" > "$constraints"   # never a second PyTorch: torchvision must match this one
    "$FED_PY" -m pip install -q --disable-pip-version-check -c "$constraints" \
      'openfl==1.9.*' 'numpy<2.4' torchvision 'mlxtend>=0.23' || die "pip could not install OpenFL into $FED_VENV"
  fi
  # the secure-channel transport carries each party's connection through ccchannel-proxy (crates/)
  [ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
  if [ -d "$ROOT/crates/ccchannel-proxy" ]; then
    if command -v cargo >/dev/null; then
      bash "$ROOT/scripts/cargo.sh" build --release --quiet --bin ccchannel-proxy || die "crates/ccchannel-proxy did not build"
    else
      log "federated: cargo not found, the securechannel transport will be skipped (install Rust with rustup)"
    fi
  fi
fi
