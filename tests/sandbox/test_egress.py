"""The egress allow-list of the local backend: exactly the listed (host, port) pairs, every
attempt logged.

A server on the host's loopback stands for the model provider; a second one, not allowed, must
never see a connection. From inside, the tests try what a scaffold (or a hostile agent) could:
the allowed pair, another port of the same host, another name, a direct IP address, a UDP
datagram, DNS lookups; and a server of the sandbox's own, which is not egress at all.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolkit.sandbox import Egress, Sandbox, create_sandbox
from toolkit.sandbox.local import egress as egress_module
from toolkit.sandbox.local import host as local_host

pytestmark = pytest.mark.skipif(
    not local_host.probe().namespaces and os.environ.get("CI") != "true",
    reason="this host has no network namespaces: the allow-list cannot be enforced here",
)


class _Recorder(ThreadingHTTPServer):
    """An HTTP server on the host's loopback that counts the connections it gets."""

    def __init__(self) -> None:
        self.connections = 0
        super().__init__(("127.0.0.1", 0), _Hello)

    def get_request(self) -> tuple[socket.socket, object]:
        self.connections += 1
        return super().get_request()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Hello(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"hello from the host\n"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def servers() -> Iterator[tuple[_Recorder, _Recorder]]:
    allowed, other = _Recorder(), _Recorder()
    for server in (allowed, other):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield allowed, other
    for server in (allowed, other):
        server.shutdown()
        server.server_close()


@pytest.fixture
def gated(root: Path, servers: tuple[_Recorder, _Recorder]) -> Iterator[Sandbox]:
    allowed, _ = servers
    with create_sandbox("local", root=root, egress=[Egress("127.0.0.1", allowed.port)]) as box:
        yield box


CONNECT = """
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    print(b"".join(iter(lambda: s.recv(4096), b"")).decode(errors="replace"))
except OSError as e:
    print("error", e)
    sys.exit(3)
"""


def _connect(box: Sandbox, host: str, port: int) -> tuple[int, str]:
    result = box.exec(["python3", "-c", CONNECT, host, str(port)], timeout=30)
    return result.returncode, (result.stdout + result.stderr).decode()


def _settled(
    box: Sandbox, count: int, last: tuple[str, str] | None = None
) -> list[dict[str, object]]:
    """The log once it has at least `count` entries, and one of (`protocol`, `host`) = `last`
    if given (the gate writes from its own thread; a name lookup may log more than one entry,
    so a count alone can be reached before the last attempt is logged)."""
    end = time.monotonic() + 10

    def waiting() -> bool:
        log = box.egress_log
        seen = last is None or any((e["protocol"], e["host"]) == last for e in log)
        return len(log) < count or not seen

    while waiting() and time.monotonic() < end:
        time.sleep(0.02)
    return box.egress_log


def test_allowed_pair_works_and_everything_else_is_refused_and_logged(
    gated: Sandbox, servers: tuple[_Recorder, _Recorder]
) -> None:
    allowed, other = servers
    assert "egress-allowlist" in gated.isolation and "netns" in gated.isolation
    code, out = _connect(gated, "127.0.0.1", allowed.port)
    assert code == 0 and "hello from the host" in out
    assert _connect(gated, "127.0.0.1", other.port)[0] == 3  # another port, same host
    assert _connect(gated, "93.184.216.34", 80)[0] == 3  # a direct IP address
    assert _connect(gated, "10.1.2.3", allowed.port)[0] == 3  # the allowed port, elsewhere
    lookup = gated.exec(["getent", "hosts", "example.com"], timeout=30)
    assert lookup.returncode != 0  # DNS for any other name fails
    assert _connect(gated, "example.com", 443)[0] == 3
    udp = gated.exec(
        ["python3", "-c", "import socket; socket.socket(2, 2).sendto(b'x', ('9.9.9.9', 53))"],
        timeout=30,
    )
    assert udp.returncode == 0  # sent into nowhere: refused by the namespace, and logged
    log = _settled(gated, 7, last=("udp", "9.9.9.9"))
    assert allowed.connections == 1 and other.connections == 0
    made = [e for e in log if e["allowed"]]
    assert made == [
        {**made[0], "host": "127.0.0.1", "port": allowed.port, "protocol": "tcp", "error": None}
    ]
    refused = {(e["protocol"], e["host"], e["port"]) for e in log if not e["allowed"]}
    assert {
        ("tcp", "127.0.0.1", other.port),
        ("tcp", "93.184.216.34", 80),
        ("tcp", "10.1.2.3", allowed.port),
        ("dns", "example.com", None),
        ("udp", "9.9.9.9", 53),
    } <= refused
    assert all(e["error"] for e in log if not e["allowed"])
    assert all(set(e) == {"time", "host", "port", "protocol", "allowed", "error"} for e in log)


def test_names_resolve_inside_to_their_own_loopback_address(
    root: Path, servers: tuple[_Recorder, _Recorder]
) -> None:
    allowed, _ = servers
    rules = [Egress("provider.invalid", 443), Egress("other.invalid", 443)]
    with create_sandbox("local", root=root, egress=rules) as box:
        hosts = box.exec(["getent", "hosts", "provider.invalid", "other.invalid"], timeout=30)
        assert hosts.returncode == 0
        addresses = dict(line.split()[::-1] for line in hosts.stdout.decode().splitlines())
        assert addresses == {"provider.invalid": "127.0.0.2", "other.invalid": "127.0.0.3"}
        dns = box.exec(
            ["python3", "-c", "import socket; print(socket.gethostbyname('provider.invalid'))"],
            timeout=30,
        )
        assert dns.stdout.decode().strip() == "127.0.0.2"
        # The name is allowed but the host cannot resolve it: the attempt is logged as failed.
        assert _connect(box, "provider.invalid", 443)[0] == 3
        log = _settled(box, 1)
    assert log[0]["host"] == "provider.invalid" and log[0]["allowed"] is True
    assert "connect failed" in str(log[0]["error"])
    assert allowed.connections == 0


def test_a_name_given_an_address_reaches_that_address_only(
    root: Path, servers: tuple[_Recorder, _Recorder]
) -> None:
    """`Egress.address`: the sandbox uses a name of the harness's choosing; the gate connects
    to the address given for it (how a controller reaches the provider relay)."""
    allowed, other = servers
    rules = [Egress("relay.invalid", allowed.port, address="127.0.0.1")]
    with create_sandbox("local", root=root, egress=rules) as box:
        code, out = _connect(box, "relay.invalid", allowed.port)
        assert code == 0 and "hello from the host" in out
        assert _connect(box, "127.0.0.1", allowed.port)[0] == 3  # the address itself: no
        assert _connect(box, "relay.invalid", other.port)[0] == 3
        log = _settled(box, 3)
    assert allowed.connections == 1 and other.connections == 0
    made = [(e["host"], e["port"]) for e in log if e["allowed"]]
    assert made == [("relay.invalid", allowed.port)]


def test_a_server_of_the_sandboxs_own_is_not_egress(gated: Sandbox) -> None:
    script = (
        "import socket, threading\n"
        "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n"
        "threading.Thread(target=lambda: l.accept()[0].close(), daemon=True).start()\n"
        "c = socket.create_connection(l.getsockname()); c.recv(1); c.close()\n"
        "print('ok')\n"
    )
    assert gated.exec(["python3", "-c", script], timeout=30).stdout.strip() == b"ok"
    time.sleep(0.3)
    assert gated.egress_log == []


def test_the_tree_cannot_touch_the_gate(
    gated: Sandbox, servers: tuple[_Recorder, _Recorder]
) -> None:
    """The resolver files are read-only, the gate's folder is out of sight, and no process of
    the gate runs inside (nothing to kill)."""
    allowed, _ = servers
    script = (
        "echo 93.184.216.34 evil.example >> /etc/hosts || echo ro-hosts;"
        "echo nameserver 9.9.9.9 > /etc/resolv.conf || echo ro-resolv;"
        "ls /tmp | grep -c ari-egress; ps -e -o pid=,comm="
    )
    out = gated.exec(["sh", "-c", script], timeout=30).stdout.decode()
    assert "ro-hosts" in out and "ro-resolv" in out
    assert "\n0\n" in out  # no gate folder under /tmp
    processes = dict(line.split() for line in out.split("\n0\n")[1].splitlines())
    assert set(processes.values()) <= {"python", "python3", "sh", "ps"}  # init, the command
    assert list(processes.values()).count("sh") == 1 and len(processes) == 3
    assert _connect(gated, "127.0.0.1", allowed.port)[0] == 0  # and the gate still works


def test_listeners_go_with_their_tree(gated: Sandbox) -> None:
    gate = gated._gate  # type: ignore[attr-defined]
    for _ in range(3):
        gated.exec(["true"], timeout=30)
    end = time.monotonic() + 10
    while gate._trees and time.monotonic() < end:
        time.sleep(0.02)
    assert gate._trees == []


def test_a_flood_of_attempts_is_capped(gated: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(egress_module, "MAX_LOG_ENTRIES", 5)
    script = (
        "import socket\n"
        "for port in range(20000, 20040):\n"
        "    try: socket.create_connection(('127.0.0.1', port), timeout=2)\n"
        "    except OSError: pass\n"
    )
    gated.exec(["python3", "-c", script], timeout=60)
    log = _settled(gated, 6)
    assert len(log) == 6 and "more attempts not logged" in str(log[-1]["error"])


def test_egress_needs_a_sandbox_without_network(root: Path) -> None:
    with pytest.raises(ValueError, match="without network"):
        create_sandbox("local", root=root, network=True, egress=[Egress("127.0.0.1", 9)])


UNPRIVILEGED = """
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from toolkit.sandbox import Egress, create_sandbox

class Hello(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello")

server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]
root = Path(sys.argv[1]) / "root"
root.mkdir()
out = {}
with create_sandbox("local", root=root, egress=[Egress("127.0.0.1", port)]) as box:
    out["isolation"] = box.isolation
    for name, url in (("allowed", f"http://127.0.0.1:{port}/"), ("other", "http://127.0.0.1:1/"),
                      ("name", "http://example.com/")):
        out[name] = box.exec(["curl", "-sS", "-m", "5", url], timeout=30).returncode
    end = time.monotonic() + 10  # the gate logs from its own thread: wait for the last try
    while time.monotonic() < end and not (
        len(box.egress_log) >= 4 and any(e["host"] == "example.com" for e in box.egress_log)
    ):
        time.sleep(0.02)
    out["log"] = [(e["host"], e["port"], e["allowed"]) for e in box.egress_log]
print(json.dumps(out))
"""


def test_unprivileged_user_gets_the_allow_list_too() -> None:
    """Without root the namespaces come from a user namespace: the gate works the same."""
    setpriv, python, curl = shutil.which("setpriv"), "/usr/bin/python3", shutil.which("curl")
    if os.geteuid() != 0 or not setpriv or not curl or not os.path.exists(python):
        pytest.skip("needs root, setpriv, curl and /usr/bin/python3 to act as an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="ari-unprivileged-"))
    try:
        os.chown(base, 65534, 65534)
        repo = Path(__file__).resolve().parents[2]
        done = subprocess.run(
            [
                setpriv,
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                python,
                "-c",
                UNPRIVILEGED,
                str(base),
            ],
            capture_output=True,
            timeout=300,
            env={"PATH": os.environ["PATH"], "HOME": str(base), "PYTHONPATH": str(repo)},
        )
        assert done.returncode == 0, done.stderr.decode()
        out = json.loads(done.stdout)
        if "userns" not in out["isolation"]:
            pytest.skip("this host allows no unprivileged user namespaces")
        assert "egress-allowlist" in out["isolation"]
        assert (out["allowed"], out["other"], out["name"]) == (0, 7, 6)  # curl's codes
        assert [e[2] for e in out["log"]] == [True, False, False, False]
        assert ["127.0.0.1", 1, False] in out["log"] and ["example.com", None, False] in out["log"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
