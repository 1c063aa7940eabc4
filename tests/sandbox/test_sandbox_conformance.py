"""The contract every sandbox backend keeps (parametrised over `BACKENDS`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from toolkit.sandbox import (
    ExecResult,
    Limits,
    LineReader,
    Sandbox,
    SandboxError,
    create_sandbox,
)
from toolkit.sandbox.cores import THREAD_VARS

PY = "python3"  # the sandbox's own Python (the host's for local, the image's for docker)
DOCKER_BACKEND = True  # this module runs against the docker backend too (conftest)


def test_exec_collects_output_and_status(box: Sandbox) -> None:
    result = box.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert isinstance(result, ExecResult)
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert not result.timed_out and not result.ok
    assert result.duration_s > 0


def test_exec_passes_input_and_binary_output(box: Sandbox) -> None:
    data = bytes(range(256)) * 1000
    result = box.exec(["cat"], input=data)
    assert result.ok and result.stdout == data


def test_missing_command_is_a_result_not_an_error(box: Sandbox) -> None:
    result = box.exec(["no-such-command-ari"])
    assert result.returncode == 127 and b"not found" in result.stderr


def test_killed_by_signal_is_negative(box: Sandbox) -> None:
    assert box.exec(["sh", "-c", "kill -KILL $$"]).returncode == -9


def test_cwd_defaults_to_root_and_may_be_relative(box: Sandbox) -> None:
    box.write_file("at-root.txt", b"root")
    box.write_file("sub/dir/x.txt", b"x")
    assert box.exec(["cat", "at-root.txt"]).stdout == b"root"
    assert box.exec(["cat", "x.txt"], cwd="sub/dir").stdout == b"x"


def test_missing_cwd_is_a_clear_error(box: Sandbox) -> None:
    with pytest.raises(SandboxError, match="nope"):
        box.exec(["true"], cwd="nope")


def test_environment_is_scrubbed(backend: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    with create_sandbox(backend, root=root, env={"SANDBOX_VAR": "given"}) as box:
        result = box.exec(["env"], env={"CALL_VAR": "call"})
    env = dict(line.split("=", 1) for line in result.stdout.decode().splitlines())
    assert "FAKE_SECRET" not in env and "OPENAI_API_KEY" not in env
    assert b"hunter2" not in result.stdout and b"sk-leak" not in result.stdout
    assert env["LANG"] == "C.UTF-8"
    assert env["SANDBOX_VAR"] == "given" and env["CALL_VAR"] == "call"
    allowed = {"PATH", "HOME", "LANG", "TMPDIR", "SANDBOX_VAR", "CALL_VAR", "PWD", "SHLVL", "_"}
    # The harness's own: numeric libraries' thread pools sized to the tree's cores.
    allowed |= set(THREAD_VARS)
    # A uid of its own has no passwd entry: its name for programs that ask (getpass).
    allowed |= {"USER", "LOGNAME"}
    assert set(env) <= allowed
    assert env.get("USER", "ari-sandbox") == env.get("LOGNAME", "ari-sandbox") == "ari-sandbox"
    assert all(env[v].isdigit() for v in THREAD_VARS if v in env)


def test_home_and_tmpdir_are_inside_root(box: Sandbox) -> None:
    """HOME is the root and TMPDIR lies inside it (so the host sees what tools leave there)."""
    script = (
        "import os, tempfile; print(os.path.relpath(tempfile.mkstemp()[1], os.environ['HOME']))"
    )
    result = box.exec([PY, "-c", script])
    assert result.ok, result.stderr
    inside = result.stdout.decode().strip()
    assert not inside.startswith("..") and box.read_file(inside) == b""
    home = box.exec(["sh", "-c", 'cd "$HOME" && pwd -P']).stdout
    assert home == box.exec(["pwd", "-P"]).stdout


def test_timeout_kills_and_reports(box: Sandbox) -> None:
    started = time.monotonic()
    result = box.exec(["sh", "-c", "echo started; sleep 60"], timeout=1)
    assert result.timed_out and not result.ok and result.returncode < 0
    assert result.stdout == b"started\n"
    assert time.monotonic() - started < 10


def test_files_round_trip_both_ways(box: Sandbox) -> None:
    box.write_file("a/b/in.txt", b"from host")
    result = box.exec(["sh", "-c", "cat a/b/in.txt && echo more >> a/b/in.txt && echo hi > out"])
    assert result.ok, result.stderr
    assert result.stdout == b"from host"
    assert box.read_file("a/b/in.txt") == b"from hostmore\n"
    assert box.read_file("out") == b"hi\n"


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "", "."])
def test_file_paths_must_stay_inside_root(box: Sandbox, bad: str) -> None:
    with pytest.raises(ValueError):
        box.read_file(bad)
    with pytest.raises(ValueError):
        box.write_file(bad, b"x")


def test_symlinks_planted_inside_are_not_followed(box: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"host secret")
    box.exec(["ln", "-s", str(outside), "link"])
    box.exec(["ln", "-s", str(tmp_path), "dirlink"])
    for path in ("link", "dirlink/outside.txt"):
        with pytest.raises(ValueError):
            box.read_file(path)
        with pytest.raises(ValueError):
            box.write_file(path, b"overwritten")
    assert outside.read_bytes() == b"host secret"


def test_fifo_planted_inside_does_not_hang_the_host(box: Sandbox) -> None:
    assert box.exec(["mkfifo", "trap"]).ok
    with pytest.raises(ValueError, match="regular"):
        box.read_file("trap")
    with pytest.raises(ValueError):
        box.write_file("trap", b"x")


def test_missing_file(box: Sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        box.read_file("nothing.txt")


WORKER = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    if request.get("hang"):
        import time; time.sleep(60)
    sys.stdout.write(json.dumps({"echo": request["x"] * 2}) + "\\n")
    sys.stdout.flush()
"""


def test_start_speaks_json_lines(box: Sandbox) -> None:
    box.write_file("worker.py", WORKER.encode())
    process = box.start([PY, "worker.py"])
    assert process.stdin is not None and process.stdout is not None
    reader = LineReader(process.stdout)
    for x in (1, 2, 3):
        process.stdin.write(json.dumps({"x": x}).encode() + b"\n")
        process.stdin.flush()
        assert json.loads(reader.readline(timeout=30)) == {"echo": 2 * x}
    assert process.poll() is None
    process.stdin.write(b'{"hang": true}\n')
    process.stdin.flush()
    with pytest.raises(TimeoutError):
        reader.readline(timeout=0.5)
    process.kill()
    assert process.wait(timeout=5) is not None
    process.stdin.close()


def test_start_exit_status_and_eof(box: Sandbox) -> None:
    process = box.start(["sh", "-c", "echo bye; exit 4"], stdin=False, stderr=False)
    assert process.stdin is None and process.stderr is None and process.stdout is not None
    reader = LineReader(process.stdout)
    assert reader.readline(timeout=30) == b"bye\n"
    assert reader.readline(timeout=30) == b""
    assert process.wait(timeout=30) == 4
    assert process.poll() == 4
    process.stdout.close()


def test_wait_times_out_with_none(box: Sandbox) -> None:
    process = box.start(["sleep", "60"], stdin=False, stdout=False, stderr=False)
    assert process.wait(timeout=0.2) is None
    box.cleanup()
    assert process.poll() is not None


def test_cleanup_is_idempotent_and_final(box: Sandbox) -> None:
    box.cleanup()
    box.cleanup()
    with pytest.raises(SandboxError, match="cleaned up"):
        box.exec(["true"])


def test_isolation_is_described(box: Sandbox, backend: str) -> None:
    assert box.name == backend
    assert box.isolation and all(isinstance(x, str) for x in box.isolation)
    assert box.not_isolated and all(isinstance(x, str) for x in box.not_isolated)
    assert "scrubbed-env" in box.isolation


def test_ephemeral_root_shows_the_root_and_keeps_writes_to_the_command(
    backend: str, root: Path
) -> None:
    """Each command sees the root's files (the host's later ones too); what it writes there
    is its own: the host's `read_file` and the next command see none of it."""
    (root / "given.txt").write_text("given")
    with create_sandbox(backend, root=root, ephemeral_root=True) as box:
        if "ephemeral-root" not in box.isolation:
            assert "ephemeral-root" in box.not_isolated  # said so, and recorded
            if backend == "docker":
                _docker_root_readonly_instead(root)
                return
            pytest.skip(f"no ephemeral root here (not_isolated: {box.not_isolated})")
        box.write_file("from-host.txt", b"host")
        first = box.exec(
            ["sh", "-c", "cat given.txt from-host.txt; echo x > new; echo y >> given.txt; cat new"]
        )
        assert first.ok, first.stderr
        assert first.stdout == b"givenhostx\n"
        assert box.read_file("given.txt") == b"given"
        with pytest.raises(FileNotFoundError):
            box.read_file("new")
        second = box.exec(["sh", "-c", "cat given.txt; echo; ls"])
        assert second.ok and second.stdout.split() == [b"given", b"from-host.txt", b"given.txt"]


def _docker_root_readonly_instead(root: Path) -> None:
    """Docker's answer to an ephemeral root, as its grader uses it: the root given read-only,
    so no write reaches it (only the capped tmpfs places take writes)."""
    with create_sandbox("docker", root=root, ephemeral_root=True, readonly=[root]) as box:
        assert "root-readonly" in box.isolation and "root-disk" not in box.not_isolated
        kept = box.exec(["sh", "-c", "echo y >> given.txt || echo refused; cat given.txt"])
        assert kept.stdout.split() == [b"refused", b"given"], kept
        assert box.exec(["sh", "-c", "echo x > /tmp/scratch && cat /tmp/scratch"]).ok
    assert (root / "given.txt").read_text() == "given"


def test_unknown_backend_names_the_known_ones(root: Path) -> None:
    with pytest.raises(ValueError, match="'local'"):
        create_sandbox("kvm", root=root)


def test_root_must_exist(backend: str, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        create_sandbox(backend, root=tmp_path / "missing")


def test_files_made_by_host_are_usable_inside(backend: str, root: Path) -> None:
    (root / "given.txt").write_text("prepared before the sandbox")
    os.chmod(root / "given.txt", 0o600)
    with create_sandbox(backend, root=root) as box:
        result = box.exec(["sh", "-c", "cat given.txt && echo x >> given.txt"])
    assert result.ok, result.stderr
    assert result.stdout == b"prepared before the sandbox"


def test_isolation_words_are_documented(backend: str, root: Path, tmp_path: Path) -> None:
    """Every word a run may record is explained in the package docstring (docs cannot drift)."""
    import toolkit.sandbox

    (tmp_path / "data").mkdir()
    words: set[str] = set()
    for kwargs in (
        {},
        {"network": True, "limits": Limits(memory_bytes=1 << 30, max_processes=64)},
        {
            "hide": [tmp_path / "x"],
            "readonly": [tmp_path / "data"],
            "limits": Limits(cpu_seconds=9, cpus=1.5),
        },
        {"ephemeral_root": True, "limits": Limits(disk_bytes=1 << 24)},
    ):
        with create_sandbox(backend, root=root, **kwargs) as box:  # type: ignore[arg-type]
            words |= set(box.isolation) | set(box.not_isolated)
    doc = toolkit.sandbox.__doc__ or ""
    missing = {w for w in words if w.split(":")[0] + (":" if ":" in w else "") not in doc}
    assert not missing, f"undocumented isolation words: {missing}"
