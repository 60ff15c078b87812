#!/usr/bin/env bash
# Linters, as CI runs them: ruff (check and format) on the Python code, the import layers (import-linter,
# the contract in pyproject.toml), rustfmt and clippy on crates/.
#   bash scripts/lint.sh          check only (exit non-zero on any finding)
#   bash scripts/lint.sh --fix    apply ruff's fixes and formatting, and cargo fmt, then check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUFF="${RUFF:-$ROOT/.venv/bin/ruff}"
[ -x "$RUFF" ] || { echo "lint: $RUFF not found: run 'bash scripts/setup.sh --with test' first" >&2; exit 2; }
[ -x "$HOME/.cargo/bin/cargo" ] && case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
cd "$ROOT"
PY_PATHS=(src tests benchmarks)
if [ "${1:-}" = "--fix" ]; then
  "$RUFF" check --fix "${PY_PATHS[@]}" || true
  "$RUFF" format "${PY_PATHS[@]}"
  (cd crates && cargo fmt --all)
fi
echo "[lint] ruff check" >&2
"$RUFF" check "${PY_PATHS[@]}"
echo "[lint] ruff format --check" >&2
"$RUFF" format --check "${PY_PATHS[@]}"
echo "[lint] lint-imports (imports run downward: docs/architecture.md, The layers)" >&2
# the tree checked is this checkout's src/, whatever ccbench the venv has installed
LINT_IMPORTS="${LINT_IMPORTS:-$(dirname "$RUFF")/lint-imports}"
[ -x "$LINT_IMPORTS" ] || { echo "lint: $LINT_IMPORTS not found: run 'bash scripts/setup.sh --with test' first" >&2; exit 2; }
PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$LINT_IMPORTS" --no-cache
echo "[lint] cargo fmt --check" >&2
(cd crates && cargo fmt --all --check)
echo "[lint] cargo clippy -D warnings" >&2
bash "$ROOT/scripts/cargo.sh" clippy --quiet --workspace --all-targets -- -D warnings
