"""Out of memory, the kernel kills sandboxed code before the harness.

A harness killed mid-run leaves its run `invalid` (recorded by the next command): an agent or a
bundle that filled the host's memory with processes each smaller than the harness could have
had the kernel's OOM killer pick the harness, and a rerun. Every sandboxed command now runs
with the highest `oom_score_adj`, set before the uid switch: where the harness holds
CAP_SYS_RESOURCE (root on a host), the command cannot lower it again.
"""

from __future__ import annotations

import os

from tests.sandbox.conftest import PY
from toolkit.sandbox import Sandbox

SCRIPT = """
import subprocess
print(open("/proc/self/oom_score_adj").read().strip())
out = subprocess.run(["cat", "/proc/self/oom_score_adj"], capture_output=True, text=True)
print(out.stdout.strip())
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("0")
    print("lowered")
except OSError:
    print("refused")
"""


CAP_SYS_RESOURCE = 24


def _has_sys_resource() -> bool:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("CapEff:"))
    return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)


def test_sandboxed_code_is_the_oom_killers_first_choice(box: Sandbox) -> None:
    done = box.exec([PY, "-c", SCRIPT], timeout=60)
    assert done.ok, done.stderr
    mine, child, lowered = done.stdout.decode().split()
    assert mine == child == "1000"
    if os.geteuid() == 0 and _has_sys_resource() and "uid:own" in box.isolation:
        assert lowered == "refused"
