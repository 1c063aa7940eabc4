#!/usr/bin/env bash
# Test set-up, run by `make test` before pytest: system packages some tests need.
#
# Idempotent and quiet: when everything is present it returns at once. It never fails the test
# run: a test whose dependency could not be installed skips itself and says why.
# Other areas may add their own lines below (one block per need).
set -u

have() { command -v "$1" >/dev/null 2>&1; }

apt_install() {
    # Only as root, only on Debian-like systems; tolerate failure (offline mirror, no apt).
    [ "$(id -u)" = 0 ] && have apt-get || return 0
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 ||
            echo "test-setup: could not install $*; tests that need it will be skipped" >&2
    fi
}

# Headless Chromium for the leaderboard site's browser test (tests/site/test_browser.py).
if ! have chromium; then
    echo "test-setup: installing Debian chromium (once)..." >&2
    apt_install chromium
fi

# The opencode scaffold (tests/agents/): Node.js + npm once, to install the pinned binary into
# .tools/opencode, and ripgrep for its grep and glob tools.
if ! bash scripts/install-opencode.sh --quiet >/dev/null; then
    echo "test-setup: could not install opencode; tests/agents will fail under CI=true" >&2
fi

exit 0
