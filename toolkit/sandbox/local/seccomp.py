"""A seccomp filter that takes the kernel keyrings and file notifications away from sandboxes.

Keyrings are kept per user (and per user namespace), not per process tree: every command that
runs as `nobody` on a root host shares one user keyring, and a key added there outlives the
sandbox. So a bundle could leave the answers it was shown in phase 2 for the next grading, or
for an agent, under a name both know. No sandboxed program needs keyrings, so `add_key`,
`request_key` and `keyctl` fail with ENOSYS, as on a kernel built without them (Docker's
default profile refuses them too).

File notifications (issue #50) are a channel between sandboxes that run at once: every
sandbox reads the same system files, so one that watches such a file (inotify, fanotify, or
dnotify's `fcntl(F_NOTIFY)` on its folder) sees when another opens or reads it, and counts it
in chosen time slots: 48 bits a second. No sandboxed program needs them (`tail -f` and the
like fall back to polling), so `inotify_init`, `inotify_init1`, `inotify_add_watch`,
`fanotify_init`, `fanotify_mark` fail with ENOSYS and `fcntl(fd, F_NOTIFY, ...)` with EINVAL,
as on a kernel built without them. Every other system call is allowed.

The program checks the architecture first: a 64-bit process may still make 32-bit system
calls (int 0x80 on x86-64, AArch32 on arm64), whose numbers differ. x32 calls on x86-64 carry
bit 30 in the number and are masked to the 64-bit table.

Stdlib only: the launcher imports it (it runs with `-I -S`), and runs it as a script to probe
whether this kernel takes the filter (`python -I -S seccomp.py` exits 0 when it works).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_AND_K = 0x54
BPF_RET_K = 0x06
OFFSET_NR, OFFSET_ARCH = 0, 4  # struct seccomp_data
X32_SYSCALL_BIT = 0x40000000

# Per machine: (audit arch, (add_key, request_key, keyctl, inotify_init, inotify_init1,
# inotify_add_watch, fanotify_init, fanotify_mark: those the table has), whether the x32 bit
# is masked, the fcntl calls).
KEYRING_CALLS: dict[str, list[tuple[int, tuple[int, ...], bool, tuple[int, ...]]]] = {
    "x86_64": [
        (0xC000003E, (248, 249, 250, 253, 294, 254, 300, 301), True, (72,)),
        (0x40000003, (286, 287, 288, 291, 332, 292, 338, 339), False, (55, 221)),
    ],
    "aarch64": [
        (0xC00000B7, (217, 218, 219, 26, 27, 262, 263), False, (25,)),
        (0x40000028, (309, 310, 311, 316, 360, 317, 367, 368), False, (55, 221)),
    ],
}
F_NOTIFY = 1026
"""fcntl's command for dnotify (a signal when a folder's files are read or changed)."""
OFFSET_ARG1 = 24  # struct seccomp_data: the low 32 bits of args[1] (little-endian)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for `machine` (default: this one) as packed sock_filter entries; None if
    this machine's system call numbers are not known here."""
    arches = KEYRING_CALLS.get(machine or platform.machine())
    if arches is None:
        return None
    insns: list[tuple[int, int, int, int]] = [_insn(BPF_LD_W_ABS, OFFSET_ARCH)]
    denies: list[int] = []  # indexes of jumps to patch once the deny returns' places are known
    invalid: list[int] = []
    for arch, numbers, x32, fcntls in arches:
        block_len = 1 + int(x32) + len(numbers) + 4 * len(fcntls) + 1
        insns.append(_insn(BPF_JEQ_K, arch, 0, block_len))  # another arch: skip the block
        insns.append(_insn(BPF_LD_W_ABS, OFFSET_NR))
        if x32:
            insns.append(_insn(BPF_AND_K, 0xFFFFFFFF & ~X32_SYSCALL_BIT))
        for number in numbers:
            denies.append(len(insns))
            insns.append(_insn(BPF_JEQ_K, number))
        for number in fcntls:  # fcntl with F_NOTIFY: EINVAL; any other command: allowed
            insns.append(_insn(BPF_JEQ_K, number, 0, 3))
            insns.append(_insn(BPF_LD_W_ABS, OFFSET_ARG1))
            invalid.append(len(insns))
            insns.append(_insn(BPF_JEQ_K, F_NOTIFY))
            insns.append(_insn(BPF_RET_K, SECCOMP_RET_ALLOW))
        insns.append(_insn(BPF_RET_K, SECCOMP_RET_ALLOW))
    insns.append(_insn(BPF_RET_K, SECCOMP_RET_ALLOW))  # an architecture not listed
    deny = len(insns)
    insns.append(_insn(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS))
    insns.append(_insn(BPF_RET_K, SECCOMP_RET_ERRNO | errno.EINVAL))
    for index in denies:
        code, _, jf, k = insns[index]
        insns[index] = (code, deny - index - 1, jf, k)
    for index in invalid:
        code, _, jf, k = insns[index]
        insns[index] = (code, deny + 1 - index - 1, jf, k)
    return b"".join(struct.pack("=HBBI", *insn) for insn in insns)


_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install(filter_code: bytes) -> None:
    """Install the filter on this process (inherited by children, kept across exec).

    Needs no_new_privs (or CAP_SYS_ADMIN); OSError if the kernel refuses.
    """
    prog = _SockFprog(len(filter_code) // 8, filter_code)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: {os.strerror(err)}")


def _probe() -> int:
    """Exit status 0 when the filter installs and keyctl then fails with ENOSYS."""
    code = program()
    if code is None:
        return 1
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return 1
    try:
        install(code)
    except OSError:
        return 1
    keyctl = KEYRING_CALLS[platform.machine()][0][1][2]
    # KEYCTL_GET_KEYRING_ID (0) of the session keyring (-3), without creating it (0).
    result = _libc.syscall(
        ctypes.c_long(keyctl), ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(0)
    )
    return 0 if result == -1 and ctypes.get_errno() == errno.ENOSYS else 1


if __name__ == "__main__":
    sys.exit(_probe())
