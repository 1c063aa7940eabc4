#!/usr/bin/env bash
# Install the opencode scaffold at the version runs are pinned to (toolkit/agents/scaffold.py),
# into .tools/opencode (npm, never global), plus ripgrep, which its grep and glob tools need.
# As root on Debian-like systems it installs nodejs, npm and ripgrep with apt when missing.
# Usage: bash scripts/install-opencode.sh   (or: make opencode). Idempotent.
set -u
cd "$(dirname "$0")/.."
PYTHON=${BIN:-.venv/bin}/python

have() { command -v "$1" >/dev/null 2>&1; }

apt_get() {
    [ "$(id -u)" = 0 ] && have apt-get || return 0
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 || {
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
    }
}

have npm || apt_get nodejs npm || echo "install-opencode: could not install nodejs/npm" >&2
have rg || apt_get ripgrep || echo "install-opencode: could not install ripgrep" >&2
have rg || echo "install-opencode: ripgrep (rg) is missing: install it (apt-get install ripgrep)" >&2
exec "$PYTHON" -m toolkit.agents.install "$@"
