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

# Docker engine for the docker backend's tests (tests/docker/, the docker column of the sandbox
# and grading suites): Debian's docker.io (dockerd, containerd, runc) and debootstrap, which
# builds the images' base without a registry. The pytest session starts a private dockerd
# (tests/docker_engine.py) and stops it by its pid at the end; a user's own engine
# (DOCKER_HOST, or the default socket) is used as it is and needs none of this.
if ! have dockerd || ! have debootstrap; then
    if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
        echo "test-setup: installing Debian docker.io and debootstrap (once)..." >&2
        apt_install docker.io debootstrap
        # The package's own service would take the default socket; ours is private.
        if have systemctl; then systemctl disable --now docker.service docker.socket >/dev/null 2>&1 || true; fi
    fi
fi

# The opencode scaffold (tests/agents/): Node.js + npm once, to install the pinned binary into
# .tools/opencode, and ripgrep for its grep and glob tools.
if ! bash scripts/install-opencode.sh --quiet >/dev/null; then
    echo "test-setup: could not install opencode; tests/agents will fail under CI=true" >&2
fi

exit 0
