#!/usr/bin/env bash
# Installs what Gregor needs to build and test on Debian 12, then builds it (`make`).
#
# Idempotent and quiet: packages already installed are skipped, and output is shown only when a
# step fails. Runs apt-get as root (through sudo when not root and sudo is available);
# `apt-get update` runs only when the package lists are empty or an install fails.
#
#   scripts/setup.sh            install missing packages, then make
#   SETUP_NO_BUILD=1 scripts/setup.sh   install only
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
    build-essential cmake pkg-config clang
    libjansson-dev libmicrohttpd-dev libzookeeper-mt-dev libssl-dev openssl zlib1g-dev liblz4-dev libzstd-dev libsnappy-dev libpcre2-dev
    zookeeper default-jre-headless
    kcat librdkafka-dev
    python3-pytest python3-pytest-xdist python3-pytest-timeout python3-kazoo python3-kafka python3-confluent-kafka
    python3-snappy python3-lz4 python3-xxhash # kafka-python's snappy and lz4 (magic 0 lz4 needs xxhash): tests/integration/test_log_validator.py
    stress-ng # the flake hunt's CPU load (docs/TESTING.md)
    netcat-openbsd
    systemd # systemd-analyze lints deploy/gregord.service (tests/integration/test_install.py)
    prometheus # tests/integration/test_metrics.py runs its binaries; its systemd unit is not needed
)

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then
            sudo=(sudo -n)
        else
            echo "setup.sh: not root and no sudo; install these packages: ${missing[*]}" >&2
            exit 1
        fi
    fi
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    apt_install() {
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends "${missing[@]}" >>"$log" 2>&1
    }
    lists_empty() { ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; }
    if lists_empty || ! apt_install; then
        if ! "${sudo[@]}" apt-get update -q >>"$log" 2>&1 || ! apt_install; then
            echo "setup.sh: installing ${missing[*]} failed:" >&2
            tail -n 40 "$log" >&2
            exit 1
        fi
    fi
fi

# A modern client for tests/integration/test_modern_client.py: @platformatic/kafka, pinned by
# tests/modern_client/package-lock.json (needs Node >= 20.19.4 and npm). Installed with `npm ci`
# only when node_modules is missing or older than the lock file; without npm, with an older Node
# or without the registry the step is skipped with a message and that test file skips. npm's own
# fetch timeouts (5 minutes a try, 3 tries) are shortened and the whole step is bounded, so an
# unreachable registry cannot stall the set-up; a failed or interrupted install leaves no
# node_modules behind (the test file runs only over a complete install).
modern="$root/tests/modern_client"
if [ ! -f "$modern/node_modules/.package-lock.json" ] || [ "$modern/package-lock.json" -nt "$modern/node_modules/.package-lock.json" ]; then
    if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
        echo "setup.sh: npm not found; skipping @platformatic/kafka (tests/integration/test_modern_client.py will skip)" >&2
    elif ! node -e 'const [a,b,c]=process.versions.node.split(".").map(Number);process.exit(a>20||(a==20&&(b>19||(b==19&&c>=4)))?0:1)' 2>/dev/null; then
        echo "setup.sh: Node $(node --version 2>/dev/null) is older than @platformatic/kafka's 20.19.4; skipping it" \
             "(tests/integration/test_modern_client.py will skip)" >&2
    else
        npm_log=$(mktemp)
        if ! (cd "$modern" && timeout -k 10 300 npm ci --no-audit --no-fund --loglevel=error \
                  --fetch-timeout=60000 --fetch-retries=1) >"$npm_log" 2>&1; then
            rm -rf "$modern/node_modules"
            echo "setup.sh: npm could not install @platformatic/kafka (is the npm registry reachable?);" \
                 "tests/integration/test_modern_client.py will skip:" >&2
            tail -n 5 "$npm_log" >&2
        fi
        rm -f "$npm_log"
    fi
fi

if [ -z "${SETUP_NO_BUILD:-}" ]; then
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if ! make -C "$root" >"$log" 2>&1; then
        echo "setup.sh: make failed:" >&2
        tail -n 60 "$log" >&2
        exit 1
    fi
fi
