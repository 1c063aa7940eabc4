"""The provider relay's cost per model call: time to the first byte, and to the last, of a
streamed answer from the scripted provider, straight and through the relay.

Four ways, in the same process, against the same scripted provider (an SSE answer of ~20
events sent at once), each with a new connection per call and with one kept-alive connection
(as opencode's client does):
  direct       a client on the host talks to the provider;
  relay        the same client through the run's relay (which keeps its own connection to the
               provider).
Each line prints medians in ms; relay lines add the time the relay adds to the first byte
against the direct line of the same kind.

    .venv/bin/python benchmarks/bench_relay.py [--calls 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the scripted provider lives with the tests

from tests.agents.fake_provider import FakeProvider, Reply  # noqa: E402
from toolkit.agents.provider_api import Credential  # noqa: E402
from toolkit.agents.relay.front import ProviderRelay  # noqa: E402

BODY = json.dumps(
    {
        "model": "m",
        "stream": True,
        "reasoning_effort": "high",
        "messages": [{"role": "user", "content": "x" * 20_000}],  # a modest conversation
    }
).encode()


def _timed(conn: http.client.HTTPConnection, path: str) -> tuple[float, float]:
    started = time.perf_counter()
    conn.request("POST", path, body=BODY, headers={"content-type": "application/json"})
    answer = conn.getresponse()
    answer.read(1)
    first = time.perf_counter() - started
    answer.read()
    return first, time.perf_counter() - started


def measure(
    ports: tuple[int, int], path: str, calls: int, keep: bool
) -> tuple[list[tuple[float, float]], ...]:
    """Calls to each port in turn (so that the machine's load falls on both alike)."""
    rows: tuple[list[tuple[float, float]], ...] = ([], [])
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for port in ports]
    for _ in range(calls):
        for index, port in enumerate(ports):
            if not keep:
                conns[index] = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            rows[index].append(_timed(conns[index], path))
            if not keep:
                conns[index].close()
    for conn in conns:
        conn.close()
    return rows


def _line(name: str, rows: list[tuple[float, float]], reference: float | None) -> float:
    first = statistics.median(r[0] for r in rows) * 1000
    last = statistics.median(r[1] for r in rows) * 1000
    added = f"  +{first - reference:.2f} ms to the first byte" if reference is not None else ""
    print(f"{name:13s}: first byte {first:6.2f} ms  last byte {last:6.2f} ms{added}")
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    text = "word " * 20
    with FakeProvider(lambda r: Reply(text=text)) as fake, tempfile.TemporaryDirectory() as tmp:
        relay = ProviderRelay(
            kind="openai-compatible",
            base_url=fake.base_url,
            model="m",
            key="sk-bench-0123456789",
            credential=Credential("Authorization", "Bearer "),
            log_path=Path(tmp) / "provider.jsonl",
        ).start()
        try:
            path = "/v1/chat/completions"
            measure((fake.port, relay.port), path, 10, keep=False)  # warm up
            print(f"{args.calls} calls each, {len(BODY):,} request bytes (medians)")
            for keep, kind in ((False, "new"), (True, "kept")):
                direct, relayed = measure((fake.port, relay.port), path, args.calls, keep)
                reference = _line(f"direct, {kind}", direct, None)
                _line(f"relay, {kind}", relayed, reference)
        finally:
            relay.close()


if __name__ == "__main__":
    main()
