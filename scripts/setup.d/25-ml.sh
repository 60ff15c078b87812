#!/usr/bin/env bash
# deep-learning notebooks: PyTorch (PyPI's build, about 5 GB; it runs on the CPU)
if "$PY" -c 'import torch' >/dev/null 2>&1; then
  log "torch already installed: $("$PY" -c 'import torch; print(torch.__version__)')"
else
  [ -z "$CCBENCH_SETUP_HOST" ] || die "PyTorch is not in $VENV (on a fleet host: add ml to ccbench_components)"
  pip_install_project ml
fi
