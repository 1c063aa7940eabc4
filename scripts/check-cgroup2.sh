#!/bin/sh
# Check the local backend's cgroups on a cgroup-v2 host: which layout it finds here, that each
# tree gets its memory, process and CPU caps from the kernel, that a kill takes a forking tree
# whole, and that nothing is left behind. Quick (well under a minute), no network, one
# PASS/FAIL line per check and a last line "check-cgroup2: PASS" or "check-cgroup2: FAIL".
#
#   scripts/check-cgroup2.sh              as this shell is (root, or a delegated scope:
#                                         systemd-run --scope -p Delegate=yes scripts/...)
#   scripts/check-cgroup2.sh --simulate   as root: first move this script into a cgroup whose
#                                         parent hands down memory only (what a container, a
#                                         VM without systemd or a login session gives), so the
#                                         toolkit must make its own top-level cgroup; the
#                                         script moves itself back and removes it at the end
#
# Run it from the checkout after `make venv`. Exit 0 all passed, 1 a check failed, 2 cannot
# run here (not cgroup v2, no venv). site/docs/maintainers/sandboxes.md explains the layouts.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CG=/sys/fs/cgroup
SIM=$CG/ari-check-sim
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

command -v "$PY" >/dev/null || { echo "check-cgroup2: cannot run: no $PY (run make venv, or set PY)"; exit 2; }
[ -f $CG/cgroup.controllers ] || {
    echo "check-cgroup2: cannot run: not a cgroup-v2 host ($CG/cgroup.controllers missing)"
    exit 2
}
own() { sed -n 's/^0:://p' /proc/self/cgroup; }
back=""
if [ "${1:-}" = "--simulate" ]; then
    shift
    [ "$(id -u)" = 0 ] || { echo "check-cgroup2: --simulate needs root"; exit 2; }
    back=$CG$(own)
    mkdir -p $SIM/shell
    # The simulated parent hands down memory only: no cpu, no pids (root's own settings stay).
    echo +memory > $SIM/cgroup.subtree_control 2>/dev/null || true
    echo $$ > $SIM/shell/cgroup.procs || { echo "check-cgroup2: cannot move into $SIM/shell"; exit 2; }
    echo "simulating: this script now runs in $(own), whose parent hands down" \
        "'$(cat $SIM/cgroup.subtree_control)' only"
fi
undo() {
    [ -n "$back" ] || return 0
    echo $$ > "$back/cgroup.procs" 2>/dev/null || echo $$ > $CG/cgroup.procs
    rmdir $SIM/shell $SIM 2>/dev/null || echo "note: $SIM not removed (still in use)"
}
trap undo EXIT

echo "host: uid $(id -u), kernel $(uname -r), systemd $([ -d /run/systemd/system ] && echo yes || echo no)"
echo "root $CG offers: $(cat $CG/cgroup.controllers); hands down: $(cat $CG/cgroup.subtree_control)"
echo "this process: $(own); it is offered: $(cat "$CG$(own)/cgroup.controllers" 2>/dev/null)"

# 1. The layout the local backend finds (it makes and enables what the layout needs).
"$PY" - <<'PY'
from toolkit.sandbox.local import host as local_host
s = local_host.probe()
layout = s.cgroups
assert layout is not None
print(f"layout: {layout.describe()}")
what = {
    "delegated": "trees go in this process's own cgroup's ari-sandboxes/ (this cgroup's "
    "processes moved to its ari-harness/ leaf)",
    "top": "trees go in the toolkit's own top-level cgroup; only the trees' processes move",
}
print(f"meaning: {what.get(layout.kind, 'no full cgroup layout: limits fall back')}")
ok = layout.memory is not None and layout.pids is not None and layout.cpu is not None
print(("PASS" if ok else "FAIL") + f": memory, pids and cpu for each tree ({layout.kind})")
raise SystemExit(0 if ok else 1)
PY
[ $? = 0 ] || fails=$((fails + 1))

# 2. The kernel's limits, kill and removal (test_cgroup2_real: the real layout; _kernel: a
#    fresh mount; test_cgroup_layouts and test_cgroup2: the layouts' rules on a fake tree).
for t in tests/sandbox/test_cgroup2_real.py tests/sandbox/test_cgroup2_kernel.py \
    tests/sandbox/test_cgroup_layouts.py tests/sandbox/test_cgroup2.py; do
    out=$("$PY" -m pytest -q -rs -p no:cacheprovider "$t" "$@" 2>&1)
    code=$?
    summary=$(printf '%s\n' "$out" | tail -n 1)
    if [ $code = 0 ] && ! printf '%s' "$summary" | grep -q "skipped" ; then
        pass "$t: $summary"
    elif [ $code = 0 ] && [ "$t" != tests/sandbox/test_cgroup2_real.py ]; then
        pass "$t: $summary (skips: $(printf '%s\n' "$out" | grep -c '^SKIPPED'))"
    else
        printf '%s\n' "$out" | tail -n 40
        fail "$t: $summary"
    fi
done

# 3. Nothing left behind: no tree's cgroup anywhere, no empty own top-level cgroup.
left=$(find $CG -maxdepth 8 -type d -name 'ari-sandbox-*' 2>/dev/null | head -5)
[ -z "$left" ] && pass "no tree's cgroup left" || fail "trees' cgroups left: $left"
[ ! -d $CG/ari-bench ] || [ -n "$(find $CG/ari-bench -mindepth 1 -type d | head -1)" ] \
    && pass "no empty $CG/ari-bench left" || fail "$CG/ari-bench left behind, empty"

# 4. What doctor says of the official track's cgroup rows here.
"$PY" - <<'PY'
from pathlib import Path
from toolkit.host.doctor import Doctor
from toolkit.tracks.model import get_track
track = get_track(Path("results"), "v1-h100-1h")
doctor = Doctor(track, "local")
for check in (doctor._cgroups(), *doctor._isolation(None)):
    word = "PASS" if check.ok else "FAIL"
    print(f"{word}: doctor {check.name}: {check.here}" + (f" (fix: {check.fix})" if check.fix else ""))
raise SystemExit(0 if all(c.ok for c in (doctor._cgroups(), *doctor._isolation(None))) else 1)
PY
[ $? = 0 ] || fails=$((fails + 1))

if [ $fails = 0 ]; then echo "check-cgroup2: PASS"; exit 0; fi
echo "check-cgroup2: FAIL ($fails failed)"
exit 1
