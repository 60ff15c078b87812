#!/usr/bin/env bash
# Set up every component (including the ml extra and the test tools), run the linters
# (scripts/lint.sh: ruff, the import layers, rustfmt, clippy) and the whole test suite, naming its
# 15 slowest steps at the end (what to make faster when the suite grows).
#   bash scripts/test.sh [pytest args...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --all --with ml --with test
cd "$ROOT"
bash "$ROOT/scripts/lint.sh"
exec "$ROOT/.venv/bin/python" -m pytest -q -ra --durations=15 "$@"
