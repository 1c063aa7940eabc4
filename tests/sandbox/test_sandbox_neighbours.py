"""Issue #38, item 3: a sandbox sees nothing of the sandboxes beside it on the same host.

The attack of the issue: from its `runner`, an agent read the memory counters of every other
sandbox under /sys/fs/cgroup, and the loop devices' `backing_file` named every live run's
workspace. Here a victim sandbox runs (with cgroup limits, as a grading's worker has them)
while an attacker sandbox looks for it through the host's per-cgroup, per-device and
per-process views. What stays host-wide (/proc/meminfo, load, timing) is a measured channel
(site/docs/security/channels.md), not tested here.

Only `sh` and coreutils run inside, so the docker backend runs the same attack.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.waiting import wait_for
from toolkit.sandbox import Limits, Sandbox, create_sandbox, neighbours

DOCKER_BACKEND = True  # the docker backend runs these too (tests/sandbox/conftest.py)

LIMITS = Limits(memory_bytes=512 * 2**20, max_processes=64, cpus=1.0)

ATTACK = r"""
echo "== cgroup"
find /sys/fs/cgroup -maxdepth 6 -type d 2>/dev/null
echo "== own cgroup"
cat /proc/self/cgroup
echo "== cgroup mount roots"
grep -E ' - cgroup2? ' /proc/self/mountinfo | cut -d' ' -f4
echo "== own limit"
cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null
echo "== counters"
find /sys/fs/cgroup -maxdepth 6 \( -name 'memory.max_usage_in_bytes' -o -name 'memory.peak' \
    -o -name 'memory.current' -o -name 'memory.usage_in_bytes' \) 2>/dev/null | wc -l
echo "== block"
for d in /sys/block /sys/class/block /sys/dev/block /sys/devices/virtual/block; do
    ls "$d" 2>/dev/null
done
echo "== backing"
cat /sys/block/*/loop/backing_file /sys/devices/virtual/block/*/loop/backing_file \
    /sys/class/block/*/loop/backing_file 2>/dev/null
echo "== diskstats"
cat /proc/diskstats /proc/partitions /proc/interrupts 2>/dev/null
echo "== net"
ls /sys/class/net 2>/dev/null
echo "== processes"
for p in /proc/[0-9]*; do tr '\0' ' ' < "$p/cmdline" 2>/dev/null; echo; done
echo "== end"
"""


def sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("== "):
            current = line[3:]
            found[current] = []
        elif line.strip():
            found[current].append(line.strip())
    return found


def victim_names(box: Sandbox, process: object) -> list[str]:
    """What names the victim in a host view: its cgroups' own folder names (local), its
    container id (docker)."""
    container = getattr(box, "container", None)
    if container:
        return [str(container), str(container)[:12]]
    pid = getattr(process, "pid", -1)
    with open(f"/proc/{pid}/cgroup") as f:
        paths = [line.rstrip("\n").split(":", 2)[2] for line in f]
    return sorted({os.path.basename(p) for p in paths if p not in ("", "/")})


def test_a_sandbox_sees_nothing_of_its_neighbour(backend: str, tmp_path: Path) -> None:
    marker = f"ari-victim-{os.getpid()}-{time.monotonic_ns()}"
    (tmp_path / "victim").mkdir()
    (tmp_path / "attacker").mkdir()
    with (
        create_sandbox(backend, root=tmp_path / "victim", limits=LIMITS) as victim,
        create_sandbox(backend, root=tmp_path / "attacker", limits=LIMITS) as attacker,
    ):
        if "mountns" not in attacker.isolation and backend != "docker":
            # A host without namespaces (the degraded variant) cannot mask: it says so.
            assert "neighbours" in attacker.not_isolated, attacker.not_isolated
            return
        assert backend == "docker" or "neighbours-masked" in attacker.isolation
        process = victim.start(["sh", "-c", f"sleep 600; echo {marker}"])
        names = wait_for(lambda: victim_names(victim, process), timeout=10) or []
        result = attacker.exec(["sh", "-c", ATTACK], timeout=120)
        process.kill()
    assert names or backend == "local", "the victim's cgroup was not found"
    assert result.returncode == 0, result
    out = result.stdout.decode(errors="replace")
    seen = sections(out)
    assert "end" in seen, out
    # Its own cgroup only: none of the victim's names, no counter of anyone else.
    for name in names:
        assert name not in out, f"the victim's cgroup {name} is visible:\n{out}"
    assert int(seen["counters"][0]) <= 2, out  # its own (v1: memory's, v2: the one folder)
    assert set(seen["cgroup mount roots"]) <= {"/"}, out  # no host hierarchy, even covered
    if backend == "docker" or "cgroup-memory" in attacker.isolation:  # its own cgroup works
        assert str(LIMITS.memory_bytes) in seen["own limit"], out
    # No block device, loop device or its backing file, no per-device I/O or interrupt counts.
    assert seen["block"] == [], out
    assert seen["backing"] == [], out
    assert seen["diskstats"] == [], out
    # No network device but its own loopback (no host interface counters).
    assert set(seen["net"]) <= {"lo"}, out
    # No process outside its own tree.
    assert not any(marker in line for line in seen["processes"]), out


def test_masked_paths_are_every_device_of_the_classes(tmp_path: Path) -> None:
    """Every block, net and bdi device wherever it lies (a disk under its PCI device), the
    classes themselves, /sys/fs but its cgroup folder; nothing that is not there."""
    sysfs = tmp_path / "sys"
    disk = sysfs / "devices/pci0000:00/0000:00:02.0/block/vda"
    loop = sysfs / "devices/virtual/block/loop0"
    for folder in (disk / "vda1", loop / "loop", sysfs / "class/block", sysfs / "block"):
        folder.mkdir(parents=True)
    for name, target in (("vda", disk), ("vda1", disk / "vda1"), ("loop0", loop)):
        (sysfs / "class/block" / name).symlink_to(target)
    for name in ("cgroup", "ext4", "fuse"):
        (sysfs / "fs" / name).mkdir(parents=True)
    found = neighbours.masked_paths(str(sysfs))
    relative = sorted(os.path.relpath(p, sysfs) for p in found if p.startswith(str(sysfs)))
    assert relative == [
        "block",
        "class/block",
        "devices/pci0000:00/0000:00:02.0/block/vda",
        "devices/virtual/block",
        "fs/ext4",
        "fs/fuse",
    ]


def test_the_pages_give_the_measured_rate() -> None:
    """The security page, both campaign pages (where `--slots` is explained) and the doctor
    (tests/test_doctor.py) give the same measured rate of what stays host-wide."""
    docs = Path(__file__).resolve().parents[2] / "site" / "docs"
    rate = f"{neighbours.MEASURED_BITS_PER_S:g} bit"
    for page in ("security/channels.md", "operators/campaigns.md", "maintainers/campaigns.md"):
        text = " ".join((docs / page).read_text().split())
        assert rate in text, page
        assert "--slots" in text or page.startswith("security"), page
