"""What a capped folder (a run's workspace with a hard size cap) costs, and what happens at the cap.

For each kind (`ext4`: a sparse image, formatted and loop-mounted; `tmpfs`: memory) and a few
caps: the median time to set one up and to release it (empty), and, for a small cap, how long
a writer takes to hit ENOSPC, how much it got written, and how much the host's disk (the image)
or memory (the tmpfs) then holds. Needs root, loop devices and `mkfs.ext4` (others are skipped
with the reason). Writes at most the small cap to the disk.

    .venv/bin/python benchmarks/bench_capped.py [--runs 5] [--dir FOLDER]
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from toolkit.sandbox import capped

GiB = 2**30
MiB = 2**20
SIZES = {"ext4": (2 * GiB, 64 * GiB), "tmpfs": (256 * MiB, 2 * GiB)}
FILL_CAP = 64 * MiB


def _cycle(folder: Path, size: int, kind: str, times: dict[str, list[float]]) -> None:
    started = time.perf_counter()
    made = capped.cap_folder(folder, size, kind=kind)
    assert made is not None, f"no {kind} cap here"
    times["setup"].append(time.perf_counter() - started)
    times["size"].append(made.size_bytes)
    started = time.perf_counter()
    made.release()
    times["release"].append(time.perf_counter() - started)


def _fill(folder: Path, kind: str) -> None:
    made = capped.cap_folder(folder, FILL_CAP, kind=kind)
    assert made is not None
    written, started = 0, time.perf_counter()
    try:
        with open(folder / "hog.bin", "wb") as f:
            while True:
                f.write(b"x" * MiB)
                f.flush()
                written += MiB
    except OSError as exc:
        error = errno.errorcode.get(exc.errno or 0, str(exc))
    took = time.perf_counter() - started
    image = capped.image_of(folder)
    held = os.stat(image).st_blocks * 512 if image.exists() else written
    started = time.perf_counter()
    made.release()
    gone = time.perf_counter() - started
    print(
        f"  fill a {FILL_CAP // MiB} MiB {kind} cap: {error} after {written // MiB} MiB in "
        f"{took:.2f} s; held {held / MiB:.0f} MiB of {'disk' if kind == 'ext4' else 'memory'}"
        f"; release then {gone * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ari-bench-capped-", dir=args.dir))
    try:
        for kind, sizes in SIZES.items():
            reason = capped.unavailable(kind)
            if reason:
                print(f"{kind}: skipped ({reason})")
                continue
            for size in sizes:
                times: dict[str, list[float]] = {"setup": [], "release": [], "size": []}
                for run in range(args.runs):
                    _cycle(work / f"{kind}-{size}-{run}", size, kind, times)
                setup, release = (statistics.median(times[k]) for k in ("setup", "release"))
                made = min(times["size"])  # lowered where the disk or memory is smaller
                print(
                    f"{kind} cap of {size / GiB:g} GiB (made: {made / GiB:.2f} GiB): set-up "
                    f"{setup * 1000:.1f} ms, release {release * 1000:.1f} ms "
                    f"(medians of {args.runs})"
                )
            _fill(work / f"fill-{kind}", kind)
    finally:
        capped.release(work)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
