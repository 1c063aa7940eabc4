"""The slow-teardown attack: sandboxed code that makes its own kill take many seconds.

`SWARM` maps one region and cuts it into tens of thousands of memory mappings (every other
page read-only: neighbours cannot merge), then forks `CHILDREN` children that inherit them all
and live on with their main thread gone (they look like zombies in /proc: a kill that walks the
tree misses them, and only the namespace's end takes them down). Once SIGKILL comes, the kernel
unmaps every mapping of every child: about ten seconds on a 2-core test box, twice the 5 s the
harness used to wait before it called the sandbox broken (and the run `invalid`: a rerun that a
bundle which knows its low phase-2 score, or an agent that cancels a call, could ask for at
will). Forking costs about as much again. Counts keep a test under a minute on such a box.
"""

from __future__ import annotations

CHILDREN = 120
REGIONS = 27_000  # read-only pages, each between two writable ones: 54,000 mappings a process

SWARM = f"""
import ctypes, mmap, os, sys, threading, time


def swarm():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    base = libc.mmap(None, 2 * {REGIONS} * page, 3, 0x22, -1, 0)  # rw, private | anonymous
    for i in range(0, 2 * {REGIONS}, 2):
        libc.mprotect(base + i * page, page, 1)
    libc.pthread_exit.argtypes = [ctypes.c_void_p]
    for _ in range({CHILDREN}):
        if os.fork() == 0:
            # The main thread leaves, a second one stays: the child shows as a zombie in
            # /proc while it lives on (a walk of the process tree that skips zombies misses it).
            threading.Thread(target=time.sleep, args=(3600,)).start()
            libc.pthread_exit(None)
"""

RUNNER_SCRIPT = (
    SWARM
    + """
swarm()
print("swarm ready", flush=True)
time.sleep(3600)
"""
)
"""A runner call that leaves the swarm behind and waits to be killed."""

LOAD_BUNDLE = (
    SWARM
    + """

def load(bundle_dir, device):
    swarm()
    raise RuntimeError("my score is low: reroll me")
"""
)
"""A bundle whose load() leaves the swarm behind and fails."""

PHASE2_BUNDLE = (
    SWARM
    + """

class Model:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]

    def next_byte_logprobs(self, contexts):
        swarm()  # seen its low score in phase 1's feedback, or in phase 2's answers: reroll
        raise RuntimeError("reroll me")


def load(bundle_dir, device):
    return Model()
"""
)
"""A bundle that passes phase 1 and, at its first phase-2 request, leaves the swarm behind."""
