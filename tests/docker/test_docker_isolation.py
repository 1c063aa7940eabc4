"""Attacks on the docker backend's isolation, against a real engine: one property each.

Runner and grader: no network at all. Controller: only its provider, through the forwarder.
Credentials, the exam and the banks stay where they belong. Limits hold, and the sandbox
survives what its processes do. Nothing here is mocked: if a property did not hold on the real
engine, the test would fail.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import FIND_VICTIMS, Upstream, containers_of, victim_command
from tests.sandbox.test_sandbox_attacks import CPU_HOG
from tests.waiting import wait_for
from toolkit.images import current
from toolkit.run import roles
from toolkit.sandbox import Egress, Limits, Sandbox, SandboxError, capped, create_sandbox
from toolkit.sandbox.docker import engine as docker_engine
from toolkit.sandbox.docker.sandbox import gpu_requests

CONNECT = """
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    s = socket.create_connection((host, port), timeout=3)
    print("connected", s.recv(16).decode(errors="replace"))
except OSError as e:
    print("refused", type(e).__name__)
"""

RESOLVE = """
import socket, sys
for name in sys.argv[1:]:
    try:
        print(name, socket.getaddrinfo(name, 80)[0][4][0])
    except OSError as e:
        print(name, "unresolved", type(e).__name__)
"""


def host_addresses() -> list[str]:
    """This host's IPv4 addresses (those a container could try to reach it at)."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines()]


def python_box(root: Path, **kwargs: Any) -> Sandbox:
    return create_sandbox("docker", root=root, **kwargs)


# -- runner and grader: no network ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["runner", "grader"])
def test_runner_and_grader_reach_nothing(
    role: str, root: Path, listener: int, upstream: Upstream
) -> None:
    readonly = [root] if role == "grader" else []
    with python_box(root, readonly=readonly) as box:
        assert "netns" in box.isolation
        targets = [(ip, listener) for ip in ["127.0.0.1", *host_addresses()]]
        targets += [(upstream.provider_ip, 8080), (upstream.other_ip, 8080)]
        for host, port in targets:
            result = box.exec(["python3", "-c", CONNECT, host, str(port)], timeout=60)
            assert result.stdout.startswith(b"refused"), (host, port, result)
        names = box.exec(["python3", "-c", RESOLVE, upstream.provider, "deb.debian.org"])
        assert names.stdout.count(b"unresolved") == 2, names
        interfaces = box.exec(["cat", "/proc/net/dev"]).stdout.decode().splitlines()[2:]
        assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]
    assert upstream.hits(upstream.provider_ip).endswith(" 0\\n'")  # never reached


# -- controller: only the provider, through the forwarder -----------------------------------------


def curl(box: Sandbox, url: str, *extra: str) -> bytes:
    result = box.exec(["curl", "-sS", "--max-time", "5", *extra, url], timeout=60)
    return result.stdout if result.ok else b"failed: " + result.stderr


def test_controller_reaches_its_provider_and_nothing_else(
    root: Path, listener: int, upstream: Upstream
) -> None:
    rule = Egress(upstream.provider, 8080)
    image = current().controller
    with create_sandbox("docker", root=root, egress=[rule], image=image) as box:
        assert "egress-allowlist" in box.isolation
        # The provider answers, by its own name, as if the controller were on the Internet.
        assert curl(box, f"http://{upstream.provider}:8080/v1/models").startswith(
            upstream.provider.encode() + b" 1"
        )
        # Another host: its name does not resolve, its address is not routed.
        assert curl(box, f"http://{upstream.other}:8080/").startswith(b"failed")
        assert curl(box, f"http://{upstream.other_ip}:8080/").startswith(b"failed")
        assert curl(box, f"http://{upstream.provider_ip}:8080/").startswith(b"failed")
        # Via the forwarder: used as an HTTP proxy, or with another Host, it still reaches the
        # provider only (a relay to one pair, not a proxy that takes a destination).
        via = curl(box, f"http://{upstream.other}:8080/", "-x", f"http://{upstream.provider}:8080")
        assert not via.startswith(upstream.other.encode())
        other_port = curl(box, f"http://{upstream.provider}:9090/")
        assert other_port.startswith(b"failed")
        # The host: neither loopback nor any of its addresses.
        for address in ["127.0.0.1", *host_addresses()]:
            assert curl(box, f"http://{address}:{listener}/").startswith(b"failed")
        log = box.egress_log
    assert log and all(e["host"] == upstream.provider and e["port"] == 8080 for e in log)
    assert all(e["allowed"] is True for e in log)
    assert {"time", "host", "port", "allowed", "error"} <= set(log[0])
    assert upstream.hits(upstream.other_ip).endswith(" 0\\n'")  # the other host never heard


def test_egress_needs_a_sandbox_without_network(root: Path) -> None:
    with pytest.raises(ValueError, match="network=False"):
        create_sandbox("docker", root=root, network=True, egress=[Egress("x.test", 443)])


# -- credentials, exam, banks ----------------------------------------------------------------------

FIND = """
import os, sys
needles = [n.encode() for n in sys.argv[2:]]
hits = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            data = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        hits += [f"environ of {pid}" for n in needles if n in data]
for top in sys.argv[1].split(":"):
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb", buffering=0) as f:
                    data = f.read(1 << 24)
            except OSError:
                continue
            hits += [path for n in needles if n in data]
print("\\n".join(hits) or "clean")
"""


def test_credential_and_exam_stay_out_of_runner_and_grader(tmp_path: Path) -> None:
    """A fake provider key in the controller's environment is in no environment and no mounted
    file of the runner and the grader; the exam and the banks are in neither the controller
    nor the runner."""
    secret = f"sk-ari-test-{secrets.token_hex(12)}"
    workspace = tmp_path / "home" / "runs" / "r1" / "workspace"
    (workspace / "data").mkdir(parents=True)
    (workspace / "data" / "train.bin").write_bytes(b"training text")
    exam_dir = tmp_path / "home" / "exams" / "demo"
    exam_dir.mkdir(parents=True)
    exam_text = f"exam-only-text-{secrets.token_hex(8)}"
    (exam_dir / "exam.jsonl").write_text(exam_text)
    bank = Path(__file__).resolve().parents[2] / "exam_builder" / "banks" / "public"
    bin_dir = roles.controller_bin(workspace / ".runner" / "bin")
    hidden = [exam_dir, bank, tmp_path / "home"]
    controller = roles.make_controller(
        "docker",
        workspace,
        bin_dir=bin_dir,
        hide=hidden,
        network=False,
        env={"PROVIDER_API_KEY": secret},
        readonly=[workspace / "data"],
    )
    runner = roles.make_runner(
        "docker", workspace, hide=[*hidden, workspace / ".runner"], readonly=[workspace / "data"]
    )
    grader_root = tmp_path / "grading"
    (grader_root / "bundle").mkdir(parents=True)
    grader = create_sandbox("docker", root=grader_root, readonly=[grader_root])
    try:
        agent = controller.start(["sh", "-c", "sleep 600"], stdin=False)  # holds the key
        assert controller.exec(["sh", "-c", 'test -n "$PROVIDER_API_KEY"']).ok
        places = f"{workspace}:/tmp:/var/tmp:/run:/dev/shm"
        for box in (runner, grader):
            result = box.exec(["python3", "-c", FIND, places, secret, exam_text], timeout=120)
            assert result.stdout.strip() == b"clean", result
        for box in (controller, runner):
            for path in (exam_dir / "exam.jsonl", exam_dir, bank, bank / "demo" / "bank.toml"):
                assert not box.exec(["test", "-e", str(path)]).ok, (box, path)
        agent.kill()
    finally:
        for box in (controller, runner, grader):
            box.cleanup()


def test_grader_sees_only_its_bundle_and_controller_has_no_python_or_gpu(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("agent files")
    grading = tmp_path / "grading"
    (grading / "bundle").mkdir(parents=True)
    (grading / "bundle" / "inference.py").write_text("x = 1\n")
    with create_sandbox("docker", root=grading, readonly=[grading]) as grader:
        assert not grader.exec(["test", "-e", str(workspace)]).ok
        assert grader.exec(["cat", "bundle/inference.py"]).stdout == b"x = 1\n"
        assert not grader.exec(["sh", "-c", "echo x > bundle/inference.py"]).ok  # read-only
        assert grader.exec(["sh", "-c", "echo x > /tmp/scratch"]).ok  # its own tmpfs
    bin_dir = roles.controller_bin(workspace / ".runner" / "bin")
    controller = roles.make_controller(
        "docker", workspace, bin_dir=bin_dir, hide=[], network=False, env={}, readonly=[]
    )
    with controller:
        for name in ("python", "python3", "python3.11"):
            found = controller.exec(["sh", "-c", f"PATH=$PATH:{_system_path()} command -v {name}"])
            assert not found.ok, found
        listing = controller.exec(["sh", "-c", "ls /usr/bin /usr/local/bin /bin"]).stdout
        assert b"python" not in listing
        devices = controller.exec(["ls", "/dev"]).stdout.split()
        assert not [d for d in devices if d.startswith((b"nvidia", b"dri", b"kfd"))]
        status = controller.exec(["sh", "-c", "grep -E '^Cap(Eff|Prm)' /proc/self/status"])
        assert status.stdout.split() == [b"CapPrm:", b"0" * 16, b"CapEff:", b"0" * 16]
        assert controller.exec(["id", "-u"]).stdout.strip() != b"0"


def _system_path() -> str:
    return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def test_gpus_are_requested_by_device_id_never_by_count(root: Path) -> None:
    requests = gpu_requests(["1"])
    assert len(requests) == 1
    assert requests[0]["DeviceIDs"] == ["1"] and not requests[0].get("Count")
    assert gpu_requests([]) == [] and gpu_requests(None) == []
    cdi = gpu_requests(["1", "GPU-1234"], "cdi")  # Docker 25+ with CDI: devices by CDI name
    assert cdi[0]["Driver"] == "cdi"
    assert cdi[0]["DeviceIDs"] == ["nvidia.com/gpu=1", "nvidia.com/gpu=GPU-1234"]
    with create_sandbox("docker", root=root) as box:
        assert "no-gpu" in box.isolation
    # This engine has no NVIDIA runtime: asking for a GPU is one clear error, not a crash.
    with pytest.raises(SandboxError, match="could not start"):
        create_sandbox("docker", root=root, gpus=["0"]).cleanup()


# -- limits and survival ---------------------------------------------------------------------------

FORK_BOMB = """
import os, time
children = 0
for _ in range(100000):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
    except OSError:
        break
print("forked", children, flush=True)
time.sleep(30)
"""

MEMORY_HOG = """
chunks = []
for _ in range(64):
    chunks.append(bytearray(64 * 2**20))
    chunks[-1][::4096] = b"x" * len(chunks[-1][::4096])
print("survived", flush=True)
"""


def test_fork_bomb_and_memory_hog_are_contained_and_the_sandbox_goes_on(root: Path) -> None:
    limits = Limits(memory_bytes=512 * 2**20, max_processes=128)
    with python_box(root, limits=limits) as box:
        assert {"cgroup-pids", "cgroup-memory"} <= set(box.isolation)
        bomb = box.exec(["python3", "-c", FORK_BOMB], timeout=10)
        assert bomb.timed_out
        assert 0 < int(bomb.stdout.split()[1]) < 128, bomb.stdout
        assert box.exec(["echo", "still here"]).stdout == b"still here\n"
        hog = box.exec(["python3", "-c", MEMORY_HOG], timeout=60)
        assert hog.returncode == -9 and b"survived" not in hog.stdout, hog
        assert box.exec(["echo", "still here"]).stdout == b"still here\n"
        assert _processes(box) == 0  # nothing of the bomb is left


def test_cpu_quota_holds_for_the_whole_container(root: Path) -> None:
    """Two processes spinning for 3 s under a quota of half a core get about 1.5 s of CPU."""
    wall, cpus = 3.0, 0.5
    with python_box(root, limits=Limits(cpus=cpus)) as box:
        assert "cpu-quota" in box.isolation and "cpu-share" not in box.not_isolated
        result = box.exec(["python3", "-c", CPU_HOG, str(wall), "2"], timeout=60)
    assert result.ok, result
    used = float(result.stdout)
    assert used < wall * cpus * 1.5, f"{used:.2f} s of CPU in {wall} s under {cpus} cores"


def test_escaped_processes_die_with_their_command(root: Path) -> None:
    """A setsid'd, TERM-ignoring grandchild dies when its command ends, or is killed."""
    with python_box(root) as box:
        escape = "setsid sh -c 'trap \"\" TERM HUP; sleep 1000' & echo started"
        assert box.exec(["sh", "-c", escape], timeout=30).stdout == b"started\n"
        assert _processes(box) == 0
        process = box.start(["sh", "-c", "(setsid sleep 1001 &); trap '' TERM; sleep 1002"])
        assert wait_for(lambda: _processes(box) >= 2, timeout=30)  # however slow the host
        process.kill()
        assert process.wait(5) == -9
        assert _processes(box) == 0


COUNT = """n=0
for p in /proc/[0-9]*; do
    read -r name < "$p/comm" || continue
    [ "$name" = ari-init ] || [ "${p#/proc/}" = "$$" ] || n=$((n + 1))
done
echo "$n"
"""


def _processes(box: Sandbox) -> int:
    """Processes in the container besides ari-init (PID 1, wrappers) and the counting shell."""
    return int(box.exec(["sh", "-c", COUNT]).stdout)


def test_disk_cap_bounds_the_tmpfs(root: Path) -> None:
    with python_box(root, limits=Limits(disk_bytes=32 * 2**20)) as box:
        assert "disk-cap" in box.isolation and "root-disk" in box.not_isolated
        result = box.exec(["sh", "-c", "head -c 64M /dev/zero > /tmp/big; echo $?"], timeout=60)
        assert result.stdout.strip() != b"0"
        size = box.exec(["sh", "-c", "wc -c < /tmp/big"]).stdout
        assert int(size) <= 32 * 2**20


def test_a_root_on_a_capped_folder_is_recorded_as_capped(tmp_path: Path) -> None:
    """A run's workspace on docker: a capped folder bind-mounted as the root; writes past the
    cap fail inside the container too, and the sandbox records `root-disk-cap`."""
    if capped.unavailable("ext4") and capped.unavailable("tmpfs"):
        pytest.fail("this host can make no capped folder")
    folder = capped.cap_folder(tmp_path / "workspace", 16 * 2**20)
    assert folder is not None
    try:
        os.chmod(folder.path, 0o777)
        with python_box(folder.path) as box:
            assert "root-disk-cap" in box.isolation and "root-disk" not in box.not_isolated
            hog = box.exec(["sh", "-c", "head -c 64M /dev/zero > big; echo $?"], timeout=60)
            assert hog.stdout.strip() != b"0"
            assert (folder.path / "big").stat().st_size <= 16 * 2**20
    finally:
        folder.release()
    with python_box(tmp_path) as plain:
        assert "root-disk" in plain.not_isolated


def test_grader_root_refuses_writes_so_only_the_capped_tmpfs_takes_any(root: Path) -> None:
    """Docker offers no ephemeral root: the grader's root is read-only instead, and says so
    (a bundle filling its own folder cannot fill the host's disk)."""
    (root / "model.bin").write_bytes(b"weights")
    with python_box(
        root, readonly=[root], ephemeral_root=True, limits=Limits(disk_bytes=16 * 2**20)
    ) as box:
        assert "root-readonly" in box.isolation and "root-disk" not in box.not_isolated
        assert "ephemeral-root" in box.not_isolated
        hog = f"head -c 1M /dev/zero > {root}/fill; echo $?"
        assert box.exec(["sh", "-c", hog], timeout=60).stdout.strip() != b"0"
        assert box.exec(["cat", str(root / "model.bin")]).stdout == b"weights"
    assert sorted(p.name for p in root.iterdir()) == ["model.bin"]


def test_stopping_three_containers_takes_under_two_seconds(tmp_path: Path) -> None:
    """Whatever their processes do with signals, the deadline's teardown is fast."""
    boxes = []
    for name in ("controller", "runner", "grader"):
        (tmp_path / name).mkdir()
        image = current().controller if name == "controller" else None
        box = create_sandbox("docker", root=tmp_path / name, image=image)
        boxes.append(box)
        for _ in range(3):
            box.start(["sh", "-c", "trap '' TERM INT HUP; while :; do sleep 1; done"])
        box.start(["sh", "-c", "setsid sh -c \"trap '' TERM; sleep 1000\"; sleep 1000"])
    client = docker_engine.connect()
    ids = [box.container for box in boxes]  # type: ignore[attr-defined]
    started = time.monotonic()
    for box in boxes:
        box.cleanup()
    took = time.monotonic() - started
    assert took < 2.0, f"stopping three containers took {took:.2f}s"
    alive = [c for c in client.api.containers(all=True) if c["Id"] in ids]
    assert alive == []


# -- clean-up after a crash ------------------------------------------------------------------------

CRASHER = """
import sys, time
from pathlib import Path
from toolkit.sandbox import create_sandbox
from toolkit.sandbox.docker.engine import owner_run
with owner_run(sys.argv[2]):
    box = create_sandbox("docker", root=Path(sys.argv[1]))
box.start(["sleep", "1000"])
print(box.container, flush=True)
time.sleep(1000)
"""


def test_a_killed_harness_takes_its_containers_along_and_recover_removes_them(
    root: Path, client: Any
) -> None:
    run_id = f"crash-{secrets.token_hex(4)}"
    process = subprocess.Popen(
        [sys.executable, "-c", CRASHER, str(root), run_id],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert process.stdout is not None
    container = process.stdout.readline().decode().strip()
    assert containers_of(client, **{"ari.run": run_id})
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # PID 1 sees its stdin close and ends the container
        if not client.api.inspect_container(container)["State"]["Running"]:
            break
        time.sleep(0.1)
    assert not client.api.inspect_container(container)["State"]["Running"]
    removed = docker_engine.remove_leftovers()
    assert any(name.endswith("-box") for name in removed)
    assert containers_of(client, **{"ari.run": run_id}) == []


def test_pins_that_do_not_match_refuse_to_start(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from toolkit.cli import cli

    pins = tmp_path / "images.json"
    wrong = "sha256:" + "0" * 64
    pins.write_text(json.dumps({role: f"ari-bench/{role}@{wrong}" for role in current().as_dict()}))
    result = CliRunner().invoke(
        cli,
        ["run", "--seed", "0", "--backend", "docker", "--images", str(pins)],
    )
    assert result.exit_code != 0
    message = result.output.strip().splitlines()
    assert len(message) == 1 and "pins want" in message[0] and wrong in message[0], message


PLANT = (
    FIND_VICTIMS
    + """
import sys
if not victims:
    print("missed: no victim wrapper in 30 s")
for _, call in victims:
    kind = sys.argv[1]
    for status in ("/run/ari-init/status", f"/run/ari-init/{call}"):
        try:  # where the wrappers' reports go (a root-only folder: refused)
            os.unlink(status)
        except OSError:
            pass
        try:
            if kind == "fifo":
                os.mkfifo(status)
            else:
                os.symlink("/etc/shadow", status)
            print("planted", kind, status)
        except OSError as e:
            print("refused", kind, status, e.strerror)
"""
)


def test_a_call_cannot_hang_or_redirect_another_calls_status(root: Path) -> None:
    """A FIFO or a link planted where another command's status goes (the wrappers' FIFO, in a
    root-only folder: refused) must neither hang the harness nor change the status taken."""
    with python_box(root) as box:
        for kind in ("fifo", "link"):
            # The victim lives until the planting is done (told by a file), however slow the
            # host: a victim that has ended, or not yet started, would leave nothing to attack.
            done = f"/tmp/planted-{kind}"
            victim = box.start(victim_command(done), stdin=False)
            planted = box.exec(["python3", "-c", PLANT, kind], timeout=60)
            box.exec(["touch", done])
            assert planted.stdout.startswith((b"planted", b"refused")), planted
            assert victim.wait(timeout=60) == 7
