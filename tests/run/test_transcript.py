"""The console copy (`toolkit.run.transcript`): secrets redacted wherever the pieces are cut,
a cap on what is stored with one note of what was dropped, and lines shown to the adapter
that never grow past their bound."""

from __future__ import annotations

import io
from pathlib import Path

from toolkit.run.transcript import (
    OBSERVED_LINE_BYTES,
    PIECE_BYTES,
    REDACTED,
    TRANSCRIPT_CAP_BYTES,
    Redactor,
    Transcript,
)

SECRET = "sk-test-0123456789abcdef"
OTHER = "another-secret-value"


def _copy(
    path: Path, data: bytes, cap_bytes: int = TRANSCRIPT_CAP_BYTES
) -> tuple[bytes, list[str], list[str]]:
    """`data` through a Transcript, read as the harness reads a pipe (in pieces of
    PIECE_BYTES); returns the file, the lines shown and the agent.log lines."""
    shown: list[str] = []
    notes: list[str] = []
    transcript = Transcript(
        path, shown.append, [SECRET, OTHER], log=notes.append, cap_bytes=cap_bytes
    )
    transcript.follow(io.BufferedReader(io.BytesIO(data)))
    transcript.close()
    return path.read_bytes(), shown, notes


def test_a_secret_split_between_two_pieces_is_redacted(tmp_path: Path) -> None:
    secret = SECRET.encode()
    for split in range(1, len(secret)):  # the piece boundary falls inside the secret
        data = b"x" * (PIECE_BYTES - split) + secret + b" and " + OTHER.encode() + b"\n"
        stored, shown, _ = _copy(tmp_path / f"t{split}.txt", data)
        expected = data.replace(secret, REDACTED).replace(OTHER.encode(), REDACTED)
        assert stored == expected
        assert SECRET not in "".join(shown) and shown[0].endswith("[redacted] and [redacted]")


def test_redaction_does_not_depend_on_where_the_stream_is_cut() -> None:
    stream = (b"a" + SECRET.encode() + b"b" + OTHER.encode() + SECRET.encode() + b"\n") * 7
    expected = stream.replace(SECRET.encode(), REDACTED).replace(OTHER.encode(), REDACTED)
    for size in (1, 2, 3, 5, 8, 13, 23, 24, 25, 64):
        redactor = Redactor([SECRET, OTHER, "short"])  # under 8 characters: not a secret
        out = b"".join(redactor.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        out += redactor.flush()
        assert out == expected, size


def test_past_the_cap_the_console_is_drained_and_one_note_says_what_was_dropped(
    tmp_path: Path,
) -> None:
    data = b"".join(b"line %d\n" % i for i in range(20000))
    cap = 10_000
    stored, shown, notes = _copy(tmp_path / "t.txt", data, cap_bytes=cap)
    head, note = stored[:cap], stored[cap:].decode()
    assert head == data[:cap]
    dropped = len(data) - cap
    want = f"console capped at {cap:,} bytes: {dropped:,} more bytes were printed and not stored"
    assert note == f"\n[ari] {want}\n"
    assert stored.count(b"[ari] console capped") == 1
    assert len(shown) == 20000 and shown[-1] == "line 19999"  # the adapter still sees it all
    assert len(notes) == 2 and "reached its cap" in notes[0] and f"{dropped:,} more" in notes[1]


def test_a_line_without_end_is_shown_in_bounded_pieces(tmp_path: Path) -> None:
    data = b"z" * (3 * OBSERVED_LINE_BYTES + 5) + b"\nend"
    stored, shown, notes = _copy(tmp_path / "t.txt", data)
    assert stored == data and not notes
    assert [len(s) for s in shown] == [OBSERVED_LINE_BYTES] * 3 + [5, 3]
