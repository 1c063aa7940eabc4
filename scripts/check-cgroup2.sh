#!/bin/sh
# Check the local backend's cgroup-v2 limits on this host (run from the checkout, after
# `make venv`). It needs a pure cgroup-v2 host and a subtree the harness may write: run it as
# root, or inside a delegated scope:
#   systemd-run --user --scope -p Delegate=yes scripts/check-cgroup2.sh      (as a user)
#   sudo scripts/check-cgroup2.sh                                            (as root)
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -f /sys/fs/cgroup/cgroup.controllers ] || { echo "not a cgroup-v2 host" >&2; exit 2; }
echo "own cgroup: $(grep '^0::' /proc/self/cgroup)"
"$PY" - <<'PY'
from toolkit.sandbox.local import host as local_host
s = local_host.probe()
print(f"cgroup v2: {local_host.is_cgroup2()}; delegated: {s.cgroup2}")
print(f"memory parent: {s.memory_parent}\npids parent: {s.pids_parent}\ncpu parent: {s.cpu_parent}")
if not s.cgroup2:
    raise SystemExit("no delegated subtree: run as root or under systemd-run -p Delegate=yes")
PY
exec "$PY" -m pytest -q -rs tests/sandbox/test_cgroup2_real.py tests/sandbox/test_cgroup2_kernel.py \
    tests/sandbox/test_cgroup2.py "$@"
