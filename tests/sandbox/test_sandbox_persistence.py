"""Attacks through what sandboxes share with the host: writable folders, IPC, keyrings, disk.

A bundle graded twice, or a bundle and a later agent, must not be able to pass anything to each
other through the host: what one sandbox writes anywhere is gone with it, and it can write
nowhere on the host but its own root. Each test is one channel; each is skipped only where the
sandbox says (in `not_isolated`) that this host cannot close it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.host_scratch import host_scratch
from toolkit.protected import checkout_root, protected_paths
from toolkit.sandbox import Limits, Sandbox, SandboxError, create_sandbox
from toolkit.sandbox.local import host as local_host

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
# Who sandboxed commands write as on the host: `nobody` as root, else the caller (user namespace).
WRITER = (NOBODY, NOBODY) if os.geteuid() == 0 else (os.getuid(), os.getgid())
# Where processes normally write; each must be private to the sandbox (where the host has it).
PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run", "/run/lock", "/var/lock")


def needs(box: Sandbox, prop: str) -> None:
    if prop not in box.isolation:
        pytest.skip(f"this host cannot provide {prop!r} (not_isolated: {box.not_isolated})")


@pytest.fixture(params=["setattr", "remount"])
def readonly_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The host made read-only in one call, and as kernels before 5.12 must: mount by mount."""
    if request.param == "remount":
        real = local_host.probe()
        monkeypatch.setattr(
            local_host, "probe", lambda: dataclasses.replace(real, mount_setattr=False)
        )
    return str(request.param)


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A folder on the host's own disk (not under /tmp, which sandboxes see as their own)."""
    path = host_scratch("test-sandbox")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _allows(uid: int, gid: int, st: os.stat_result, other: int, user: int, group: int) -> bool:
    mode = st.st_mode
    return bool(
        mode & other or (st.st_uid == uid and mode & user) or (st.st_gid == gid and mode & group)
    )


def _writable_by(uid: int, gid: int, st: os.stat_result) -> bool:
    return _allows(uid, gid, st, stat.S_IWOTH, stat.S_IWUSR, stat.S_IWGRP)


def _searchable_by(uid: int, gid: int, st: os.stat_result) -> bool:
    return _allows(uid, gid, st, stat.S_IXOTH, stat.S_IXUSR, stat.S_IXGRP)


@pytest.fixture(scope="module")
def host_writable_dirs() -> list[str]:
    """Every folder on the host that the sandbox's user may write, found by walking all of /
    (every mounted filesystem but the kernel's /proc and /sys), plus the usual places.

    The walk goes only where that user could: not below a folder it may not search (nothing
    under /root is reachable by `nobody`), nor below a private place (/tmp, /var/tmp, ...: the
    sandbox has its own, so the host's folders under them do not exist there; the place itself
    is written to, and a place that were not private would show on the host). Walking all of
    it took 47 s on a box whose /var/tmp held a test Docker engine's layers, for nothing."""
    found = {p for p in PLACES if os.path.isdir(p)}
    stack = ["/"]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False) or entry.path in ("/proc", "/sys"):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if _writable_by(*WRITER, st):
                found.add(entry.path)
            if _searchable_by(*WRITER, st) and entry.path not in PLACES:
                stack.append(entry.path)
    return sorted(found)


WRITE = """
import json, os, sys
dirs, name, keep = json.load(open(sys.argv[1])), sys.argv[2], set(sys.argv[3].split(","))
written, refused = [], {}
for d in dirs:
    path = os.path.join(d, name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        refused[d] = e.errno
        continue
    os.write(fd, b"answers")
    os.close(fd)
    written.append(d)
    if d not in keep:  # a write outside the private places already fails the test: undo it
        os.unlink(path)
print(json.dumps({"written": written, "refused": refused}))
"""

FIND = """
import json, os, sys
dirs, name = json.load(open(sys.argv[1])), sys.argv[2]
print(json.dumps([d for d in dirs if os.path.lexists(os.path.join(d, name))]))
"""


def test_no_host_folder_is_shared_or_writable(
    readonly_by: str, tmp_path: Path, host_dir: Path, host_writable_dirs: list[str]
) -> None:
    """What one sandbox writes in any folder its user may write on the host reaches neither a
    second sandbox nor the host; outside the private places, the write itself fails."""
    owned = host_dir / "owned-by-the-writer"  # like another sandbox's root, or a workspace
    owned.mkdir()
    os.chown(owned, *WRITER)
    name = f"ari-probe-{uuid.uuid4().hex}"
    dirs = sorted({*host_writable_dirs, str(owned)})
    private = [p for p in PLACES if os.path.isdir(p)]
    roots = [tmp_path / "first", tmp_path / "second"]
    for root in roots:
        root.mkdir()
        (root / "dirs.json").write_text(json.dumps(dirs))
    try:
        with create_sandbox("local", root=roots[0]) as first:
            needs(first, "mountns")  # a host with namespaces must provide all of this
            wrote = first.exec([PY, "-c", WRITE, "dirs.json", name, ",".join(private)])
        assert wrote.ok, wrote.stderr
        report = json.loads(wrote.stdout)
        leaked = sorted(set(report["written"]) - set(private))
        assert leaked == [], f"the sandbox wrote to {len(leaked)} host folders: {leaked[:10]}"
        assert str(owned) in report["refused"]
        assert set(private) & set(report["written"]), "the private places must stay writable"
        with create_sandbox("local", root=roots[1]) as second:
            found = second.exec([PY, "-c", FIND, "dirs.json", name])
        assert found.ok, found.stderr
        assert json.loads(found.stdout) == [], "a second sandbox saw what the first one wrote"
        on_host = [d for d in dirs if os.path.lexists(os.path.join(d, name))]
        assert on_host == [], "the host kept what the sandbox wrote"
    finally:
        for d in dirs:
            with_name = Path(d) / name
            if with_name.exists():
                with_name.unlink()


IPC = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
try:
    libc.mq_open
    rt = libc
except AttributeError:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
mode, key, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
secret = b"answers-" + name.encode()
IPC_CREAT, IPC_NOWAIT, IPC_RMID = 0o1000, 0o4000, 0
KEYCTL_SET_TIMEOUT, KEYCTL_SEARCH, KEYCTL_READ = 15, 10, 11
KEY_SPEC_USER_KEYRING = -4
libc.shmat.restype = ctypes.c_void_p
result = {}

def sysv_create():
    shm = libc.shmget(key, 4096, IPC_CREAT | 0o666)
    if shm >= 0:
        addr = libc.shmat(shm, None, 0)
        ctypes.memmove(addr, secret, len(secret))
        libc.shmdt(ctypes.c_void_p(addr))
    result["shm"] = shm >= 0
    msq = libc.msgget(key, IPC_CREAT | 0o666)
    buf = ctypes.create_string_buffer(8 + len(secret))
    ctypes.memmove(ctypes.addressof(buf), (1).to_bytes(8, "little") + secret, 8 + len(secret))
    result["msg"] = msq >= 0 and libc.msgsnd(msq, buf, len(secret), IPC_NOWAIT) == 0
    sem = libc.semget(key, 1, IPC_CREAT | 0o666)
    result["sem"] = sem >= 0 and libc.semctl(sem, 0, 16, 42) == 0  # SETVAL 42

def sysv_find():
    shm = libc.shmget(key, 0, 0)
    if shm >= 0:
        addr = libc.shmat(shm, None, 0)
        result["shm"] = ctypes.string_at(addr, len(secret)) == secret
    msq = libc.msgget(key, 0)
    if msq >= 0:
        buf = ctypes.create_string_buffer(8 + 256)
        got = libc.msgrcv(msq, buf, 256, 0, IPC_NOWAIT)
        result["msg"] = got > 0 and buf.raw[8 : 8 + got] == secret
    sem = libc.semget(key, 0, 0)
    result["sem"] = sem >= 0 and libc.semctl(sem, 0, 12) == 42  # GETVAL

def sysv_remove():
    for get, ctl in ((lambda: libc.shmget(key, 0, 0), libc.shmctl),
                     (lambda: libc.msgget(key, 0), libc.msgctl)):
        ident = get()
        if ident >= 0:
            ctl(ident, IPC_RMID, None)
    sem = libc.semget(key, 0, 0)
    if sem >= 0:
        libc.semctl(sem, 0, IPC_RMID)

def mq(flags):
    rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    return rt.mq_open(("/" + name).encode(), flags, 0o666, None)

def keyring_call(*args):
    nr = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
    return libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])

if mode == "create":
    sysv_create()
    q = mq(os.O_CREAT | os.O_RDWR)
    result["mq"] = q >= 0 and rt.mq_send(q, secret, len(secret), 0) == 0
    add_key = {"x86_64": 248, "aarch64": 217}[os.uname().machine]
    serial = libc.syscall(ctypes.c_long(add_key), b"user", name.encode(), secret,
                          ctypes.c_size_t(len(secret)), ctypes.c_long(KEY_SPEC_USER_KEYRING))
    result["keyring"] = serial > 0
    if serial > 0:  # never outlive the test, even where nothing stops it
        keyring_call(KEYCTL_SET_TIMEOUT, serial, 120)
elif mode == "find":
    sysv_find()
    q = mq(os.O_RDONLY | os.O_NONBLOCK)
    if q >= 0:
        buf = ctypes.create_string_buffer(8192)
        got = rt.mq_receive(q, buf, 8192, None)
        result["mq"] = got > 0 and buf.raw[:got] == secret
    search = libc.syscall(ctypes.c_long({"x86_64": 250, "aarch64": 219}[os.uname().machine]),
                          ctypes.c_long(KEYCTL_SEARCH), ctypes.c_long(KEY_SPEC_USER_KEYRING),
                          b"user", name.encode(), ctypes.c_long(0))
    result["keyring"] = search > 0
else:  # remove what the host can reach
    sysv_remove()
    rt.mq_unlink(("/" + name).encode())
print(json.dumps(result))
"""


def test_ipc_and_keyrings_do_not_carry_data_between_sandboxes(tmp_path: Path) -> None:
    """SysV shared memory, message queues, semaphores, POSIX message queues and the user
    keyring of the shared sandbox uid: a second sandbox finds nothing the first one left."""
    key = int.from_bytes(os.urandom(3), "big") + 0x41000000
    name = f"ari-ipc-{uuid.uuid4().hex[:12]}"
    roots = [tmp_path / "first", tmp_path / "second"]
    for root in roots:
        root.mkdir()
    try:
        with create_sandbox("local", root=roots[0]) as first:
            needs(first, "mountns")  # a host with namespaces must provide ipcns
            keyrings_open = "keyrings" in first.not_isolated  # said so: no seccomp here
            created = first.exec([PY, "-c", IPC, "create", str(key), name])
        assert created.ok, created.stderr
        made = json.loads(created.stdout)
        assert made["shm"] and made["msg"] and made["sem"] and made["mq"], made
        if not keyrings_open:
            assert made["keyring"] is False, "add_key must be refused"
        with create_sandbox("local", root=roots[1]) as second:
            found = second.exec([PY, "-c", IPC, "find", str(key), name])
        assert found.ok, found.stderr
        seen = json.loads(found.stdout)
        leaks = {c for c, got in seen.items() if got and (c != "keyring" or not keyrings_open)}
        assert leaks == set(), f"a second sandbox read what the first left in {leaks}"
        for table in ("shm", "msg", "sem"):  # and none of it is left in the host's tables
            rows = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
            assert str(key) not in {row.split()[0] for row in rows}, table
    finally:  # where it did leak, the host removes what it can reach
        subprocess.run([PY, "-c", IPC, "remove", str(key), name], check=False)


DISK_HOG = """
import errno, json, os, sys
written = {}
for place in sys.argv[1:]:
    total = 0
    with open(os.path.join(place, "hog"), "wb") as f:
        st = os.fstat(f.fileno())
        try:
            while total < 512 * 1024 * 1024:
                f.write(b"x" * (1 << 20))
                f.flush()
                total += 1 << 20
            error = None
        except OSError as e:
            error = errno.errorcode[e.errno]
    written[place] = [total, error, f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"]
with open("/proc/self/mountinfo") as f:  # the type of each mounted device, as seen inside
    types = {line.split()[2]: line.split(" - ")[1].split()[0] for line in f}
print(json.dumps({"written": written, "types": types}), flush=True)
sys.stdin.read()  # hold the tmpfs (and its device number) until the test has looked
"""


def _host_devices() -> set[str]:
    """The major:minor of every filesystem mounted on the host (as this process sees it)."""
    with open("/proc/self/mountinfo") as f:
        return {line.split()[2] for line in f}


def test_disk_cap_on_private_places(tmp_path: Path) -> None:
    """A hog writing 512 MiB into each private place gets ENOSPC at the cap, counted over all
    of them together; the host's disk and shared memory are untouched and nothing persists.

    "Untouched" is checked on what the hog wrote, not on the host's free space (which other
    processes change meanwhile): every byte went to one tmpfs that no host path mounts, so it
    lived in the sandbox's own memory and went away with it."""
    cap = 16 * 1024 * 1024
    places = [p for p in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock") if os.path.isdir(p)]
    with create_sandbox("local", root=tmp_path, limits=Limits(disk_bytes=cap)) as box:
        needs(box, "mountns")  # with namespaces, the private places are capped
        assert "disk-cap" in box.isolation
        assert "root-disk" in box.not_isolated  # the root is capped per file only: said so
        hog = box.start([PY, "-c", DISK_HOG, *places])
        assert hog.stdin is not None and hog.stdout is not None and hog.stderr is not None
        line = hog.stdout.readline()
        host_devices = _host_devices()  # while the hog's tmpfs is still mounted
        hog.stdin.close()
        assert hog.wait(timeout=60) == 0, hog.stderr.read()
        df = box.exec(["df", "-B1", "--output=size", "/tmp"])
    report = json.loads(line)
    written = report["written"]
    assert all(error == "ENOSPC" for _, error, _ in written.values()), written
    assert sum(total for total, _, _ in written.values()) <= cap
    assert int(df.stdout.split()[-1]) <= cap
    devices = {device for _, _, device in written.values()}
    assert len(devices) == 1, written  # one filesystem for all places: the cap is shared
    (device,) = devices
    assert report["types"].get(device) == "tmpfs", report["types"]  # memory, not a disk
    assert device not in host_devices  # not the host's disk, /dev/shm or any host mount
    assert not any(Path(p, "hog").exists() for p in places)


def test_root_inside_a_hidden_folder(tmp_path: Path, host_dir: Path) -> None:
    """A run's workspace under the hidden state folder: the root and the read-only data inside
    the hidden folder work; nothing else of the hidden folder is there, not even its names."""
    state = host_dir / "state"
    root = state / "runs" / "mine" / "workspace"
    data = state / "data"
    for folder in (root, data, state / "runs" / "other", state / "exams"):
        folder.mkdir(parents=True)
    (state / "exams" / "exam.jsonl").write_text('{"answer": "secret"}\n')
    (state / "runs" / "other" / "answers.txt").write_text("secret")
    (state / "top.txt").write_text("secret")
    (data / "train.txt").write_text("training text")
    (root / "TASK.md").write_text("task")
    with create_sandbox("local", root=root, hide=[state], readonly=[data]) as box:
        needs(box, "hidden-paths")
        listing = box.exec(["ls", "-A", str(state), str(state / "runs")])
        grep = box.exec(["grep", "-rs", "secret", str(state)])
        work = box.exec(["sh", "-c", "cat TASK.md && echo out > new.txt && cat new.txt"])
        read = box.exec(["cat", str(data / "train.txt")])
        write_data = box.exec(["sh", "-c", f"echo x > {data}/train.txt"])
        write_cover = box.exec(["sh", "-c", f"echo x > {state}/planted"])
    assert listing.ok, listing.stderr
    assert listing.stdout.decode().split() == [
        f"{state}:",
        "data",
        "runs",
        f"{state}/runs:",
        "mine",
    ]
    assert b"secret" not in grep.stdout
    assert work.stdout == b"taskout\n" and (root / "new.txt").read_text() == "out\n"
    assert read.stdout == b"training text"
    assert write_data.returncode != 0 and data.joinpath("train.txt").read_text() == "training text"
    assert write_cover.returncode != 0 and not (state / "planted").exists()


def test_runtime_works_with_the_checkout_hidden(tmp_path: Path) -> None:
    """Every sandbox hides the checkout (and so the venv inside it) and $ARI_HOME; the
    interpreter and its libraries must still run, the toolkit and the exam engine must not."""
    checkout = checkout_root()
    if checkout is None:
        pytest.skip("the toolkit does not run from a source checkout here")
    script = (
        "import json, os, sys, sqlite3, importlib.util as u\n"
        "print(json.dumps({'toolkit': u.find_spec('toolkit') is not None,"
        " 'engine': u.find_spec('exam_builder') is not None,"
        f" 'listing': sorted(os.listdir({str(checkout)!r}))}}))"
    )
    with create_sandbox("local", root=tmp_path, hide=protected_paths()) as box:
        needs(box, "hidden-paths")
        result = box.exec([PY, "-c", script])
    assert result.ok, result.stderr
    seen = json.loads(result.stdout)
    assert seen["toolkit"] is False and seen["engine"] is False
    venv = Path(sys.prefix).resolve()
    expected = [venv.relative_to(checkout).parts[0]] if venv.is_relative_to(checkout) else []
    assert seen["listing"] == expected


def test_hidden_path_moved_by_another_sandbox(tmp_path: Path) -> None:
    """The controller sees the whole workspace, the runner must not see `.runner/`: a
    controller that renames the hidden folder (or swaps in a symlink) must not make the runner
    see it under another name."""
    root = tmp_path / "ws"
    secret = root / ".runner"
    secret.mkdir(parents=True)
    (secret / "token").write_text("secret")
    with (
        create_sandbox("local", root=root) as controller,
        create_sandbox("local", root=root, hide=[secret]) as runner,
    ):
        needs(runner, "hidden-paths")
        assert runner.exec(["cat", ".runner/token"]).stdout == b""
        moved = controller.exec(["sh", "-c", "mv .runner moved && mkdir .runner"])
        assert moved.ok, moved.stderr
        with pytest.raises(SandboxError, match="was replaced"):
            runner.exec(["cat", "moved/token"])
        swapped = controller.exec(["sh", "-c", "rmdir .runner && ln -s moved .runner"])
        assert swapped.ok, swapped.stderr
        with pytest.raises(SandboxError, match="symlink"):
            runner.exec(["cat", "moved/token"])
