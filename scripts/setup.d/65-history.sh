#!/usr/bin/env bash
# history: the results store (DuckDB) and Apache Otava (change points over time) in its own environment <venv>/otava
# Otava 0.8 pins numpy 2.2 and pulls cloud clients (BigQuery, Grafana, Slack...), so it gets an
# environment of its own (about 300 MB); ccbench drives its command line with CSV files.
[ -z "$CCBENCH_SETUP_HOST" ] || { log "history: not needed on fleet hosts (the controller keeps the store)"; return 0; }
OTAVA_VENV="$VENV/otava"
if [ -x "$OTAVA_VENV/bin/otava" ]; then
  log "history: Otava already installed in $OTAVA_VENV"
else
  log "history: making $OTAVA_VENV (apache-otava 0.8)"
  [ -x "$OTAVA_VENV/bin/python" ] || "$PY" -m venv "$OTAVA_VENV" || die "could not create $OTAVA_VENV"
  "$OTAVA_VENV/bin/python" -m pip install -q --disable-pip-version-check 'apache-otava==0.8.*' \
    || die "pip could not install apache-otava into $OTAVA_VENV"
fi
# the store itself is DuckDB, in the project's environment
pip_install_project history
