#!/usr/bin/env bash
# Install what ccbench needs on Debian 12 (as root) into ./.venv, component by component.
#
#   bash scripts/setup.sh                  core: fio, a virtual environment with ccbench (the quick plan)
#   bash scripts/setup.sh --with NAME ...  add components (see scripts/setup.d/*.sh)
#   bash scripts/setup.sh --all            every component except "ml" and "test"
#   bash scripts/setup.sh --list           list the components
#   bash scripts/setup.sh --host --with NAME   on a fleet host (ccbench fleet run does this): only the
#                                          system side; Python packages come from the fleet's wheelhouse
#                                          in $CCBENCH_VENV; no implied core; before any apt call the
#                                          host's package mirror is checked, and a component whose
#                                          packages are missing where none answers stops with the reason
#
# Re-running is cheap: each step checks what is already there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CCBENCH_SETUP_HOST="${CCBENCH_SETUP_HOST:-}"
[ "${1:-}" = "--host" ] && { CCBENCH_SETUP_HOST=1; shift; }
VENV="${CCBENCH_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
export ROOT VENV PY CCBENCH_SETUP_HOST
cd "$ROOT"

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

APT_UPDATED=0
# apt_install PKG...: install the Debian packages that are missing.
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -n "$CCBENCH_SETUP_HOST" ]; then
    # a fleet host: no apt call at all unless a package mirror answers (hosts are often offline)
    command -v apt-get >/dev/null || die "${missing[*]} missing and this host has no apt-get (the set-up scripts are for Debian/Ubuntu): install them by hand"
    local mirror
    mirror=$("$PY" -m ccbench.fleet.remote mirror) || die "${missing[*]} missing: could not check the package mirror"
    [ "$mirror" = "reachable" ] || die "${missing[*]} missing and no package mirror answers ($mirror): install them on the host or give it a mirror"
  fi
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root to install ${missing[*]} (run as root, or install them yourself)"
    SUDO=sudo
    [ -z "$CCBENCH_SETUP_HOST" ] || SUDO="sudo -n"  # never a password prompt on a fleet host
  else
    SUDO=
  fi
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq >/dev/null
    APT_UPDATED=1
  fi
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# pip_install ARGS...: pip into the project's virtual environment.
pip_install() {
  if [ -n "$CCBENCH_SETUP_HOST" ]; then
    log "fleet host: Python packages come from the fleet's wheelhouse (ccbench_components), not pip"
    return 0
  fi
  "$PY" -m pip install -q --disable-pip-version-check "$@"
}
# pip_install_project [EXTRA]: ccbench itself (editable) with an extra's packages, built by the venv's
# own setuptools (core installs it first): no isolated build environment made for each call (about 5 s each)
pip_install_project() {
  pip_install --no-build-isolation -e "$ROOT${1:+[$1]}"
}
# need_checkout DIR WHAT: a step that builds from the source checkout stops on a fleet host (only
# the wheel and these scripts are shipped there) with the reason
need_checkout() {
  [ -e "$ROOT/$1" ] || die "$2 is built from the source checkout ($1), which fleet hosts do not get: build it on the host from a checkout"
}
export -f log die apt_install pip_install pip_install_project need_checkout

ALL_DEFAULT=()
COMPONENTS=(core)
[ -z "$CCBENCH_SETUP_HOST" ] || COMPONENTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with) shift; [ $# -gt 0 ] || die "--with needs a component name (see --list)"; COMPONENTS+=("$1") ;;
    --all) for f in scripts/setup.d/*.sh; do n=$(basename "$f" .sh); n=${n#*-}; case "$n" in ml|test|core) ;; *) COMPONENTS+=("$n");; esac; done ;;
    --list) for f in scripts/setup.d/*.sh; do printf '%-12s %s\n' "$(basename "$f" .sh | sed 's/^[0-9]*-//')" "$(sed -n 2p "$f" | sed 's/^# //')"; done; exit 0 ;;
    -h|--help) sed -n 2,10p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

# Run the selected components in the order of their file names (NN-name.sh).
for f in scripts/setup.d/*.sh; do
  n=$(basename "$f" .sh); n=${n#*-}
  for want in "${COMPONENTS[@]}"; do
    if [ "$want" = "$n" ]; then
      log "component: $n"
      # shellcheck source=/dev/null
      source "$f"
      break
    fi
  done
done
for want in "${COMPONENTS[@]}"; do
  ls scripts/setup.d/*-"$want".sh >/dev/null 2>&1 || die "unknown component '$want' (see --list)"
done
log "done: ${COMPONENTS[*]:-}"
