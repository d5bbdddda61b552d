#!/usr/bin/env bash
# Installs what perftracker needs to build and test on Debian 12, and nothing that is
# already there. Safe to run again. Used by `make demo`, `make test` and .ci/run.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --build    only what `make` needs
set -euo pipefail

# libcmocka-dev is here, not in test_pkgs: configuring the tree (plain `make`) needs it.
build_pkgs=(build-essential cmake pkg-config zlib1g-dev libzstd-dev libmicrohttpd-dev
            python3-dev clang libclang-rt-14-dev libcmocka-dev)
test_pkgs=(python3-torch python3-pandas python3-numpy chromium nodejs npm
           valgrind procps time)

# nettle: the control plane's HMAC-SHA256 and constant-time comparison (src/control/auth.c).
build_pkgs+=(nettle-dev)
want=("${build_pkgs[@]}")
[[ "${1:-}" == "--build" ]] || want+=("${test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's nodejs may be absent while a newer node is on PATH; then skip nodejs/npm.
if command -v node >/dev/null && command -v npm >/dev/null; then
    tmp=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
    missing=("${tmp[@]+"${tmp[@]}"}")
fi
# apt's output (hundreds of lines for torch's dependencies) goes to a log: the terminal gets
# one line, or, when apt fails, its error lines and the log's name.
if ((${#missing[@]})); then
    log=$(mktemp "${TMPDIR:-/tmp}/perftracker-install-deps.XXXXXX")
    echo "install-deps: installing ${missing[*]} (apt's output: $log)" >&2
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
    if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
        grep -E '^(E|W|Err):|error|dpkg: ' "$log" | tail -n 20 >&2 || tail -n 20 "$log" >&2
        echo "install-deps: apt-get failed; its whole output is in $log" >&2
        exit 1
    fi
    rm -f "$log"
fi
