#!/usr/bin/env bash
# Set up every component (including the ml extra and the test tools), run the linters
# (scripts/lint.sh: ruff, the import layers, rustfmt, clippy) and the whole test suite, naming its
# 15 slowest steps at the end (what to make faster when the suite grows).
#   bash scripts/test.sh [pytest args...]
# The suite runs on $CCBENCH_TEST_WORKERS workers (2 unless set; 1 runs it in one process), each test
# file whole on one (tests/conftest.py), then the tests marked `alone` (they need the machine to
# themselves) on one worker. Both passes always run; the exit status is the first failing one's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --all --with ml --with test
cd "$ROOT"
bash "$ROOT/scripts/lint.sh"
PY="$ROOT/.venv/bin/python"
WORKERS="${CCBENCH_TEST_WORKERS:-2}"
case "$WORKERS" in ''|*[!0-9]*) echo "scripts/test.sh: CCBENCH_TEST_WORKERS must be a whole number, not '$WORKERS'" >&2; exit 2 ;; esac
if [ "$WORKERS" -le 1 ]; then
  exec "$PY" -m pytest -q -ra --durations=15 "$@"
fi
first=0
"$PY" -m pytest -q -ra --durations=15 -n "$WORKERS" --dist loadfile --no-loadscope-reorder -m "not alone" "$@" || first=$?
echo "== the tests that need the machine to themselves (marked alone), on one worker"
second=0
alone=("$@")
if [ $# -eq 0 ]; then
  # only the files that hold one: collecting the whole suite again (pytest rewrites every test file's
  # asserts in each process where PYTHONDONTWRITEBYTECODE is set) took about 20 s for 4 tests
  mapfile -t alone < <(grep -l 'mark\.alone' tests/test_*.py)
fi
"$PY" -m pytest -q -ra -m alone "${alone[@]}" || second=$?
[ "$second" -eq 5 ] && second=0  # no test of the arguments given is marked alone
[ "$first" -ne 0 ] && exit "$first"
exit "$second"
