#!/usr/bin/env bash
# The one place that installs what Vigil's two commands need on a fresh
# Debian machine (README: `make run` and `make test` do all the set-up).
#
#   scripts/deps.sh run    what `make run` needs: the PostgreSQL server
#                          binaries (Lite starts its own cluster) and Node
#                          with npm (the console's libraries)
#   scripts/deps.sh test   the above, plus promtool (Debian's prometheus,
#                          for the alert-rule and metrics tests) and
#                          Debian's chromium (the console's browser tests)
#
# Present tools are left alone, so on a ready machine this prints nothing
# and takes milliseconds. Missing ones are installed with apt-get when this
# runs as root on a machine that has it; otherwise it stops at once, before
# any test runs, with one message that names the packages and the command.
set -euo pipefail

what=${1:-test}
case "$what" in
run | test) ;;
*)
  echo "usage: scripts/deps.sh run|test (got '$what')" >&2
  exit 2
  ;;
esac

have_initdb() {
  command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

# missing holds "package:why" pairs, in install order.
missing=()
have_initdb || missing+=("postgresql:Lite and the tests start private PostgreSQL clusters from its server binaries (no service is started)")
{ command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } ||
  missing+=("nodejs npm:npm ci fetches the console's libraries (adr/0020)")
if [ "$what" = test ]; then
  command -v promtool >/dev/null 2>&1 ||
    missing+=("prometheus:its promtool checks the alert rules and a live /metrics scrape (its service is not started)")
  [ -x /usr/bin/chromium ] ||
    missing+=("chromium:the console's browser tests drive Debian's Chromium headless (adr/0021)")
fi
[ ${#missing[@]} -eq 0 ] && exit 0

pkgs=()
for m in "${missing[@]}"; do
  pkgs+=(${m%%:*})
done

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  {
    echo "make $what needs packages this machine lacks: ${pkgs[*]}"
    for m in "${missing[@]}"; do echo "  ${m%%:*}: ${m#*:}"; done
    if command -v apt-get >/dev/null 2>&1; then
      echo "Install them as root, then run make $what again:"
    else
      echo "This machine has no apt-get; install the equivalents of these Debian packages, for example as root on Debian:"
    fi
    echo "  apt-get update && apt-get install -y --no-install-recommends ${pkgs[*]}"
  } >&2
  exit 1
fi

echo "make $what: installing ${pkgs[*]} with apt-get:"
for m in "${missing[@]}"; do echo "  ${m%%:*}: ${m#*:}"; done
export DEBIAN_FRONTEND=noninteractive
# prometheus is a service package: a policy-rc.d that forbids starting
# services keeps it from starting while it installs (removed afterwards
# unless one was already in place). Nothing here is meant to run.
own_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  own_policy=1
fi
trap '[ -n "$own_policy" ] && rm -f /usr/sbin/policy-rc.d' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
if [[ " ${pkgs[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1; then
  systemctl stop prometheus >/dev/null 2>&1 || true
fi
echo "make $what: installed ${pkgs[*]}"
