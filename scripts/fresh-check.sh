#!/usr/bin/env bash
# Fresh-machine check: clone this checkout's HEAD into a new directory that other users cannot
# enter, then run the README's two quickstart commands there, one after the other, exactly as the
# README writes them, and print each one's exit code and wall time.
#   bash scripts/fresh-check.sh [--keep] [--only 1|2] [DIR]
# DIR (default: a new directory under /var/tmp) must not exist. --keep leaves the clone behind
# (it is removed otherwise, whatever the outcome). --only N runs only the Nth command. The output
# of each command goes to DIR.logs/quickstart-N.log (kept). Exit code: 0 when both commands exit 0.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
keep=0 only="" dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --only) shift; only="${1:-}"; [[ "$only" =~ ^[12]$ ]] || { echo "fresh-check: --only takes 1 or 2" >&2; exit 2; } ;;
    -h|--help) sed -n 2,8p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fresh-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) dir="$1" ;;
  esac
  shift
done
# the commands are read from the README, so that the check and the README cannot disagree
mapfile -t commands < <(awk '/^## Quickstart/{q=1} q&&/^```sh/{c=1;next} c&&/^```/{exit} c&&NF{print}' "$ROOT/README.md")
[ "${#commands[@]}" -eq 2 ] || { echo "fresh-check: README.md's Quickstart should hold two commands in a sh block; found ${#commands[@]}" >&2; exit 2; }
if [ -z "$dir" ]; then
  dir="$(mktemp -d /var/tmp/ccbench-fresh.XXXXXX)"
  rmdir "$dir"
fi
[ ! -e "$dir" ] || { echo "fresh-check: $dir exists; name a new directory" >&2; exit 2; }
logs="$dir.logs"
mkdir -p "$logs"
umask 077
git clone -q --no-hardlinks "$ROOT" "$dir"
chmod 700 "$dir"
cleanup() { [ "$keep" = 1 ] || rm -rf "$dir"; }
trap cleanup EXIT
echo "fresh-check: $(git -C "$dir" rev-parse --short HEAD) cloned into $dir (mode 700); logs in $logs"
status=0
for i in 1 2; do
  [ -z "$only" ] || [ "$only" = "$i" ] || continue
  start=$(date +%s)
  set +e
  (cd "$dir" && bash -c "${commands[$((i - 1))]}") >"$logs/quickstart-$i.log" 2>&1 </dev/null
  code=$?
  set -e
  took=$(( $(date +%s) - start ))
  printf 'quickstart %d: exit %d in %dm%02ds: %s\n' "$i" "$code" $((took / 60)) $((took % 60)) "${commands[$((i - 1))]}"
  [ "$code" -eq 0 ] || { status=1; tail -n 5 "$logs/quickstart-$i.log" | sed 's/^/    /'; }
done
exit "$status"
