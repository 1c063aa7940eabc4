"""The local backend's egress allow-list: a sandbox reaches its (host, port) pairs, nothing else.

Every process tree of a local sandbox has its own network namespace with only a loopback. With
an allow-list, the launcher's init sets that namespace up before the command starts
(`launcher.egress_prepare` / `egress_start`):

- every address is routed to the loopback ("AnyIP"), so a connection to anything that is not a
  listener is refused at once (and seen below) instead of failing unseen;
- a private, read-only `/etc/hosts` maps each allowed name to a loopback address of its own
  (127.0.0.2, 127.0.0.3, ...: two providers may share port 443), and `/etc/resolv.conf` names
  127.0.0.1 as the only nameserver; an allowed IP address keeps its own address;
- it creates, inside the namespace, one TCP listener per allowed pair, a UDP socket on
  127.0.0.1:53 and a packet socket on `lo`, hands them over to this side (SCM_RIGHTS, over a
  Unix socket in a host folder the sandbox never sees), and keeps none of them. Nothing of the
  gate runs in the sandbox: the command cannot stop it, talk to it or forge its log.

This side, `EgressGate` (one thread per sandbox, plus one per relayed connection), accepts on the
listeners and relays each connection, byte for byte, to its one allowed (host, port) resolved on
the host (TLS goes through untouched, end to end); answers DNS (allowed names: their loopback
address; any other name: NXDOMAIN); and watches the packet socket for attempts the namespace
refused: a TCP SYN answered by a reset (a port or address with no listener), a UDP datagram
answered by "port unreachable". Every attempt goes to `log` (`Sandbox.egress_log`).

Not covered: what the allowed destination itself relays (a provider that fetches URLs for its
caller, or other sites behind the same address and port); IPv6 literals where the namespace has
no IPv6 (refused, but not logged); and bytes exchanged inside the sandbox's own loopback.
"""

from __future__ import annotations

import array
import contextlib
import ipaddress
import logging
import selectors
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from toolkit.sandbox.base import Egress

log = logging.getLogger(__name__)

DNS_ADDRESS = "127.0.0.1"
CONNECT_TIMEOUT_S = 15.0
MAX_LOG_ENTRIES = 10_000  # a flood of refused attempts must not eat the host's memory
MAX_PENDING_SYNS = 4096
MAX_RELAYS = 256  # connections relayed at once (a thread each): more are closed and logged
PACKET_OUTGOING = 4
_SOCKETS_PER_TREE = 64


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _normal(host: str) -> str:
    return host.lower().rstrip(".")


def _inside_addresses(hosts: list[str]) -> dict[str, str]:
    """Where each allowed host is reached inside: an IP address stays itself, `localhost` is
    127.0.0.1, and each name gets a loopback address of its own, from 127.0.0.2 on."""
    found: dict[str, str] = {}
    for host in map(_normal, hosts):
        if _is_ip(host):
            found[host] = str(ipaddress.ip_address(host))
        elif host == "localhost":
            found[host] = "127.0.0.1"
    taken = set(found.values())
    last = 1
    for host in map(_normal, hosts):
        if host in found:
            continue
        last += 1
        while f"127.0.0.{last}" in taken:
            last += 1
        if last > 254:
            raise ValueError("too many egress host names (at most 250)")
        found[host] = f"127.0.0.{last}"
    return found


def _assemble(program: list[tuple[str, int, int, str | None, str | None]]) -> bytes:
    """Classic BPF from (label, opcode, k, jump-if-true label, jump-if-false label) rows."""
    where = {row[0]: index for index, row in enumerate(program) if row[0]}
    out = b""
    for index, (_, code, k, true, false) in enumerate(program):
        jt = where[true] - index - 1 if true else 0
        jf = where[false] - index - 1 if false else 0
        out += struct.pack("HBBI", code, jt, jf, k)
    return out


# Classic BPF for the packet socket on `lo` (Ethernet framing): keep TCP segments with SYN or
# RST set, and ICMP / ICMPv6; drop everything else (the relayed bytes above all).
LDH, LDB, LDXB_MSH, LDB_IND, JEQ, JSET, RET = 0x28, 0x30, 0xB1, 0x50, 0x15, 0x45, 0x06
_FILTER = _assemble(
    [
        ("", LDH, 12, None, None),  # ethertype
        ("", JEQ, 0x0800, "ip4", None),
        ("", JEQ, 0x86DD, "ip6", "drop"),
        ("ip4", LDB, 23, None, None),  # IPv4 protocol
        ("", JEQ, 6, "tcp4", None),
        ("", JEQ, 1, "keep", "drop"),  # ICMP
        ("tcp4", LDXB_MSH, 14, None, None),  # X = IPv4 header length
        ("", LDB_IND, 14 + 13, None, None),  # TCP flags
        ("", JSET, 0x06, "keep", "drop"),  # SYN or RST
        ("ip6", LDB, 14 + 6, None, None),  # IPv6 next header
        ("", JEQ, 6, "tcp6", None),
        ("", JEQ, 58, "keep", "drop"),  # ICMPv6
        ("tcp6", LDB, 14 + 40 + 13, None, None),
        ("", JSET, 0x06, "keep", "drop"),
        ("keep", RET, 256, None, None),
        ("drop", RET, 0, None, None),
    ]
)
SO_ATTACH_FILTER = 26


def _attach_filter(sock: socket.socket) -> None:
    """Kernel-side filtering: without it every relayed byte would be copied to us as well."""
    import ctypes

    buffer = ctypes.create_string_buffer(_FILTER)
    fprog = struct.pack("HL", len(_FILTER) // 8, ctypes.addressof(buffer))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class _Tree:
    """The sockets one process tree handed over; closed when its init goes away."""

    def __init__(self, handoff: socket.socket) -> None:
        self.handoff = handoff
        self.sockets: list[socket.socket] = []


class EgressGate:
    """Host side of one sandbox's allow-list (see the module docstring). Thread-safe `log`."""

    def __init__(self, rules: Sequence[Egress]) -> None:
        self.rules = list(dict.fromkeys(rules))
        if not self.rules:
            raise ValueError("an egress gate needs at least one allowed destination")
        for rule in self.rules:
            if not rule.host or not 0 < rule.port < 65536:
                raise ValueError(f"egress destination {rule.host!r}:{rule.port} is not valid")
        self.addresses = _inside_addresses([r.host for r in self.rules])
        if any(ipaddress.ip_address(a).version == 6 for a in self.addresses.values()):
            raise ValueError("egress to IPv6 addresses is not supported by the local backend")
        # Where each listener inside leads: (address inside, port) -> the allowed rule.
        self.routes = {(self.addresses[_normal(r.host)], r.port): r for r in self.rules}
        self._lock = threading.Lock()
        self._log: list[dict[str, object]] = []
        self._dropped = 0
        self._pending: OrderedDict[tuple[str, int, str, int], float] = OrderedDict()
        self.folder = Path(tempfile.mkdtemp(prefix="ari-egress-"))
        (self.folder / "hosts").write_text(self._hosts_file(), encoding="utf-8")
        (self.folder / "resolv.conf").write_text(
            f"nameserver {DNS_ADDRESS}\noptions timeout:1 attempts:1\n", encoding="utf-8"
        )
        for name in ("hosts", "resolv.conf"):
            (self.folder / name).chmod(0o444)
        self._handoff = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._handoff.bind(str(self.folder / "handoff.sock"))
        self._handoff.listen(64)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._handoff, selectors.EVENT_READ, ("handoff", None))
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._trees: list[_Tree] = []
        self._relays: set[socket.socket] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="egress-gate", daemon=True)
        self._thread.start()

    # -- what the launcher needs --------------------------------------------------------------

    def _hosts_file(self) -> str:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [
            f"{address}\t{name}"
            for name, address in self.addresses.items()
            if not _is_ip(name) and name != "localhost"
        ]
        return "\n".join(lines) + "\n"

    def launcher_spec(self) -> dict[str, object]:
        """The `egress` entry of a launch spec (plain data: it is marshalled)."""
        return {
            "handoff": str(self.folder / "handoff.sock"),
            "hosts": str(self.folder / "hosts"),
            "resolv": str(self.folder / "resolv.conf"),
            "listen": sorted([list(key) for key in self.routes]),
            "dns": DNS_ADDRESS,
        }

    # -- the log ------------------------------------------------------------------------------

    @property
    def log(self) -> list[dict[str, object]]:
        with self._lock:
            entries = list(self._log)
            dropped = self._dropped
        if dropped:
            entries.append(
                {
                    "time": _now(),
                    "host": None,
                    "port": None,
                    "protocol": "tcp",
                    "allowed": False,
                    "error": f"{dropped} more attempts not logged (log full)",
                }
            )
        return entries

    def _record(
        self, host: str, port: int | None, protocol: str, allowed: bool, error: str | None
    ) -> None:
        entry: dict[str, object] = {
            "time": _now(),
            "host": host,
            "port": port,
            "protocol": protocol,
            "allowed": allowed,
            "error": error,
        }
        with self._lock:
            if len(self._log) < MAX_LOG_ENTRIES:
                self._log.append(entry)
            else:
                self._dropped += 1

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._closed:
            for key, _ in self._selector.select(timeout=1.0):
                kind, data = key.data
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    if kind == "handoff":
                        self._take_tree(sock)
                    elif kind == "tree":
                        self._tree_event(data)
                    elif kind == "listener":
                        self._accept(sock, data)
                    elif kind == "dns":
                        self._answer_dns(sock)
                    elif kind == "sniffer":
                        self._watch(sock)
                except OSError as e:  # one bad socket must not stop the gate
                    log.debug("egress gate: %s: %s", kind, e)
            self._expire_pending()

    def _take_tree(self, handoff: socket.socket) -> None:
        conn, _ = handoff.accept()
        conn.settimeout(10.0)
        try:
            fds = array.array("i")
            _, ancdata, _, _ = conn.recvmsg(64, socket.CMSG_SPACE(_SOCKETS_PER_TREE * 4))
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % fds.itemsize
                    fds.frombytes(payload[:usable])
        except OSError:
            conn.close()
            return
        tree = _Tree(conn)
        for fd in fds:
            sock = socket.socket(fileno=fd)
            tree.sockets.append(sock)
            self._adopt(sock)
        self._trees.append(tree)
        conn.setblocking(False)
        self._selector.register(conn, selectors.EVENT_READ, ("tree", tree))
        conn.sendall(b"k")

    def _adopt(self, sock: socket.socket) -> None:
        """Register a socket from a tree by what it is (not by what the tree says it is)."""
        sock.setblocking(False)
        if sock.family == socket.AF_PACKET:
            _attach_filter(sock)
            self._selector.register(sock, selectors.EVENT_READ, ("sniffer", None))
        elif sock.type == socket.SOCK_DGRAM:
            self._selector.register(sock, selectors.EVENT_READ, ("dns", None))
        else:
            address, port = sock.getsockname()[:2]
            rule = self.routes.get((address, port))
            if rule is not None:
                self._selector.register(sock, selectors.EVENT_READ, ("listener", rule))

    def _tree_event(self, tree: _Tree) -> None:
        with contextlib.suppress(OSError):
            if tree.handoff.recv(64):
                return  # nothing is expected from the tree; ignore it
        self._drop_tree(tree)

    def _drop_tree(self, tree: _Tree) -> None:
        for sock in [*tree.sockets, tree.handoff]:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            sock.close()
        if tree in self._trees:
            self._trees.remove(tree)

    # -- TCP: accept and relay ----------------------------------------------------------------

    def _accept(self, listener: socket.socket, rule: Egress) -> None:
        try:
            inside, _ = listener.accept()
        except BlockingIOError:
            return
        with self._lock:
            busy = len(self._relays) >= MAX_RELAYS
        if busy:
            inside.close()
            self._record(rule.host, rule.port, "tcp", True, "refused: too many connections")
            return
        inside.setblocking(True)
        inside.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # relay, do not batch
        with self._lock:
            self._relays.add(inside)
        threading.Thread(
            target=self._relay, args=(inside, rule), name="egress-relay", daemon=True
        ).start()

    def _relay(self, inside: socket.socket, rule: Egress) -> None:
        try:
            try:
                target = (rule.address or rule.host, rule.port)
                outside = socket.create_connection(target, CONNECT_TIMEOUT_S)
            except OSError as e:
                self._record(rule.host, rule.port, "tcp", True, f"connect failed: {e}")
                # A reset, as the destination itself would give: not a clean, empty answer.
                inside.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            self._record(rule.host, rule.port, "tcp", True, None)
            outside.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._relays.add(outside)
            try:
                outside.settimeout(None)
                _pump_both(inside, outside)
            finally:
                with self._lock:
                    self._relays.discard(outside)
                outside.close()
        finally:
            with self._lock:
                self._relays.discard(inside)
            inside.close()

    # -- DNS ----------------------------------------------------------------------------------

    def _answer_dns(self, sock: socket.socket) -> None:
        for _ in range(64):
            try:
                query, peer = sock.recvfrom(1500)
            except BlockingIOError:
                return
            parsed = _parse_query(query)
            if parsed is None:
                continue
            name, qtype, question_end = parsed
            address = None if _is_ip(name) else self.addresses.get(name)
            if address is None:
                self._record(name, None, "dns", False, "name not in the allow-list")
            answer = _dns_reply(query, question_end, address, qtype)
            with contextlib.suppress(OSError):
                sock.sendto(answer, peer)

    # -- refused attempts, seen on the packet socket ------------------------------------------

    def _watch(self, sock: socket.socket) -> None:
        for _ in range(256):
            try:
                frame, address = sock.recvfrom(512)
            except BlockingIOError:
                return
            if address[2] != PACKET_OUTGOING or len(frame) < 14:
                continue  # each frame on lo is seen going out and coming in: keep one
            ethertype = struct.unpack_from("!H", frame, 12)[0]
            packet = frame[14:]
            seen = _parse_ipv4(packet) if ethertype == 0x0800 else _parse_ipv6(packet)
            if seen is not None:
                self._saw(*seen)

    def _saw(self, kind: str, src: str, sport: int, dst: str, dport: int) -> None:
        if kind == "syn":
            self._pending[(src, sport, dst, dport)] = time.monotonic()
            while len(self._pending) > MAX_PENDING_SYNS:
                self._pending.popitem(last=False)
        elif kind == "syn-ack":  # accepted (a gate listener, or a server of the sandbox's own)
            self._pending.pop((dst, dport, src, sport), None)
        elif kind == "rst":  # the reply to a SYN: nobody listens at (src, sport)
            if self._pending.pop((dst, dport, src, sport), None) is not None:
                self._record(src, sport, "tcp", False, "not in the allow-list (refused)")
        elif kind == "udp-unreachable" and (dst, dport) != (DNS_ADDRESS, 53):
            self._record(dst, dport, "udp", False, "not in the allow-list (refused)")

    def _expire_pending(self) -> None:
        horizon = time.monotonic() - 30.0
        while self._pending:
            key, seen = next(iter(self._pending.items()))
            if seen > horizon:
                break
            del self._pending[key]

    # -- teardown -----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the gate: every listener, relay and tree socket is closed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(timeout=5)
        for tree in list(self._trees):
            self._drop_tree(tree)
        with self._lock:
            relays = list(self._relays)
        for sock in relays:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for sock in (self._handoff, self._wake_r, self._wake_w):
            sock.close()
        self._selector.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _pump_both(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until both directions are done (half-closes passed on)."""
    open_from = {a: b, b: a}
    with selectors.DefaultSelector() as selector:
        for sock in open_from:
            selector.register(sock, selectors.EVENT_READ)
        while open_from:
            for key, _ in selector.select():
                source = key.fileobj
                assert isinstance(source, socket.socket)
                target = open_from[source]
                try:
                    data = source.recv(65536)
                except OSError:
                    return  # a reset: end both directions
                if data:
                    try:
                        target.sendall(data)
                    except OSError:
                        return
                    continue
                selector.unregister(source)
                del open_from[source]
                with contextlib.suppress(OSError):
                    target.shutdown(socket.SHUT_WR)


def _parse_ipv4(packet: bytes) -> tuple[str, str, int, str, int] | None:
    if len(packet) < 20:
        return None
    header = (packet[0] & 0x0F) * 4
    protocol = packet[9]
    src, dst = socket.inet_ntoa(packet[12:16]), socket.inet_ntoa(packet[16:20])
    if protocol == 6 and len(packet) >= header + 14:
        sport, dport = struct.unpack_from("!HH", packet, header)
        return _tcp_kind(packet[header + 13], src, sport, dst, dport)
    if protocol == 1 and len(packet) >= header + 8 + 20 + 4:
        icmp_type, code = packet[header], packet[header + 1]
        inner = packet[header + 8 :]
        inner_header = (inner[0] & 0x0F) * 4
        if icmp_type == 3 and code == 3 and inner[9] == 17 and len(inner) >= inner_header + 4:
            inner_src, inner_dst = socket.inet_ntoa(inner[12:16]), socket.inet_ntoa(inner[16:20])
            sport, dport = struct.unpack_from("!HH", inner, inner_header)
            return "udp-unreachable", inner_src, sport, inner_dst, dport
    return None


def _parse_ipv6(packet: bytes) -> tuple[str, str, int, str, int] | None:
    if len(packet) < 40:
        return None
    next_header = packet[6]
    src = socket.inet_ntop(socket.AF_INET6, packet[8:24])
    dst = socket.inet_ntop(socket.AF_INET6, packet[24:40])
    if next_header == 6 and len(packet) >= 54:
        sport, dport = struct.unpack_from("!HH", packet, 40)
        return _tcp_kind(packet[53], src, sport, dst, dport)
    unreachable = packet[40:42] == b"\x01\x04"  # ICMPv6 port unreachable
    if next_header == 58 and len(packet) >= 48 + 40 + 4 and unreachable and packet[54] == 17:
        inner = packet[48:]
        inner_src = socket.inet_ntop(socket.AF_INET6, inner[8:24])
        inner_dst = socket.inet_ntop(socket.AF_INET6, inner[24:40])
        sport, dport = struct.unpack_from("!HH", inner, 40)
        return "udp-unreachable", inner_src, sport, inner_dst, dport
    return None


def _tcp_kind(
    flags: int, src: str, sport: int, dst: str, dport: int
) -> tuple[str, str, int, str, int] | None:
    if flags & 0x04:
        return "rst", src, sport, dst, dport
    if flags & 0x12 == 0x02:
        return "syn", src, sport, dst, dport
    if flags & 0x12 == 0x12:
        return "syn-ack", src, sport, dst, dport
    return None


def _parse_query(query: bytes) -> tuple[str, int, int] | None:
    """(name in lower case, qtype, offset after the question) of a one-question DNS query."""
    if len(query) < 12 or query[2] & 0x80 or struct.unpack_from("!H", query, 4)[0] != 1:
        return None
    labels: list[str] = []
    offset = 12
    while offset < len(query):
        length = query[offset]
        offset += 1
        if length == 0:
            break
        if length > 63 or offset + length > len(query):
            return None
        labels.append(query[offset : offset + length].decode("ascii", "replace").lower())
        offset += length
    else:
        return None
    if offset + 4 > len(query):
        return None
    qtype = struct.unpack_from("!H", query, offset)[0]
    return ".".join(labels), qtype, offset + 4


def _dns_reply(query: bytes, question_end: int, address: str | None, qtype: int) -> bytes:
    """NXDOMAIN for a name not allowed; its loopback address for an allowed name's A query; no
    answer (NOERROR) for its other record types."""
    flags = 0x8000 | (query[2] & 0x01) << 8 | 0x80  # response, RD copied, RA
    answers = b""
    if address is None:
        flags |= 3
    elif qtype == 1:
        answers = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(address)
    header = query[:2] + struct.pack("!HHHHH", flags, 1, 1 if answers else 0, 0, 0)
    return header + query[12:question_end] + answers
