#!/usr/bin/env bash
# Set up every component (including the ml extra and the test tools), run the linters
# (scripts/lint.sh: ruff, the import layers, rustfmt, clippy) and the whole test suite.
#   bash scripts/test.sh [pytest args...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --all --with ml --with test
cd "$ROOT"
bash "$ROOT/scripts/lint.sh"
exec "$ROOT/.venv/bin/python" -m pytest -q -ra "$@"
