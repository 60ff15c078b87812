#!/usr/bin/env bash
# fio, a virtual environment with ccbench and its core dependencies (the quick plan)
apt_install fio python3-venv util-linux procps
# on a fleet host the venv and ccbench come from the fleet's wheelhouse
[ -z "$CCBENCH_SETUP_HOST" ] || return 0
if [ ! -x "$PY" ]; then
  log "creating the virtual environment $VENV"
  python3 -m venv "$VENV" || die "python3 -m venv failed: install python3-venv (Debian) or use Python >= 3.11"
fi
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || die "ccbench needs Python >= 3.11 in $VENV"
pip_install "setuptools>=68" wheel   # what pyproject.toml's build-system asks, for pip_install_project
pip_install_project
# byte-compile ccbench once: where PYTHONDONTWRITEBYTECODE is set, every command would otherwise
# compile it again at start (a tenth of a second per command)
"$PY" -m compileall -q "$ROOT/src/ccbench" >/dev/null || true
