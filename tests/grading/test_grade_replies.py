"""A bundle runs inside the worker and can replace its replies: each malformed reply must end as
a graded result with a reason (`toolkit grade` exits 0 with a report), never a host exception.

The bundles patch the worker's `Channel.send` (the worker is the `__main__` module of the
worker process) and send one malformed shape each; the raw ones write their own frames.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from toolkit.cli import cli
from toolkit.grading import grade_bundle

TAMPER = """
import __main__, os, struct

_send = __main__.Channel.send


def _raw(channel, body, claimed=None):
    size = len(body) if claimed is None else claimed
    data = __main__.MAGIC + channel.nonce + struct.pack(">I", size) + body
    while data:
        data = data[os.write(channel.fd_out, data):]


def _send_tampered(self, message):
    if {target}:
        m = dict(message)
{change}
        if m is not None:
            _send(self, m)
        return
    _send(self, message)


__main__.Channel.send = _send_tampered
"""

GENERATE = '"outputs" in message'
LOGPROBS = '"logprobs" in message'
LOAD = 'message.get("stage") == "load" and message.get("ok") is True'

# name -> (which reply is changed, the change (statements on the reply `m`; m = None: nothing
# more is sent), a regular expression the reason must match)
CASES = {
    "one_output_too_few": (
        GENERATE,
        "for k in ('outputs', 'sizes', 'types'): m[k] = m[k][:-1]",
        "malformed",
    ),
    "one_output_too_many": (
        GENERATE,
        "for k in ('outputs', 'sizes', 'types'): m[k] = m[k] * 2",
        "malformed",
    ),
    "integers_for_base64": (GENERATE, "m['outputs'] = [7 for _ in m['outputs']]", "malformed"),
    "outputs_not_a_list": (GENERATE, "m['outputs'] = 'AAAA'", "malformed"),
    "ok_is_a_string": (GENERATE, "m['ok'] = 'yes'", "malformed"),
    "ok_missing": (GENERATE, "del m['ok']", "malformed"),
    "outputs_missing": (GENERATE, "del m['outputs']", "malformed"),
    "extra_key": (GENERATE, "m['score'] = 100", "malformed"),
    "negative_size": (GENERATE, "m['sizes'] = [-1 for _ in m['sizes']]", "malformed"),
    "error_not_text": (GENERATE, "m = {'ok': False, 'error': {'a': 1}}", "malformed"),
    "load_time_a_string": (LOAD, "m['load_s'] = 'fast'", "malformed"),
    "load_time_nan": (LOAD, "m['load_s'] = float('nan')", "malformed"),
    "not_json": (GENERATE, "_raw(self, b'\\xff\\xfe{'); m = None", "not JSON"),
    "deeply_nested": (GENERATE, "_raw(self, b'[' * 20000 + b']' * 20000); m = None", "not JSON"),
    "not_an_object": (GENERATE, "_raw(self, b'[1, 2, 3]'); m = None", "not a JSON object"),
    "huge_reply": (
        GENERATE,
        "_raw(self, b'x' * 65536, claimed=200 * 2**20); m = None",
        "honest reply",
    ),
    "logprobs_an_integer": (LOGPROBS, "m['logprobs'] = 5", "malformed"),
    "logprobs_not_base64": (LOGPROBS, "m['logprobs'] = '***'", "not valid base64"),
    "logprobs_float64_bytes": (
        LOGPROBS,
        "import base64, numpy as np\n"
        "rows = np.frombuffer(base64.b64decode(m['logprobs']), '<f4').astype('<f8')\n"
        "m['logprobs'] = base64.b64encode(rows.tobytes()).decode()",
        "float32",
    ),
    "logprobs_one_row_short": (LOGPROBS, "m['logprobs'] = m['logprobs'][:-1368]", "float32|base64"),
    "logprobs_missing": (LOGPROBS, "del m['logprobs']", "malformed"),
}


def _tampering_bundle(make_bundle: MakeBundle, target: str, change: str) -> Path:
    """The oracle bundle, plus a patch of the worker's `send` applying `change` to `target`."""
    body = "\n".join("        " + line for line in change.split("\n"))
    return make_bundle(TAMPER.format(target=target, change=body) + textwrap.dedent(ORACLE))


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_reply_is_a_graded_result(
    case: str, make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    target, change, expected = CASES[case]
    bundle = _tampering_bundle(make_bundle, target, change)
    exam = make_exam(code_questions(3))
    out = tmp_path / "report.json"
    phases = ["--phase", "bpb"] if target == LOGPROBS else ["--phase", "generate"]
    result = CliRunner().invoke(
        cli,
        [
            "grade",
            str(bundle),
            "--exam",
            str(exam),
            "--json",
            str(out),
            *phases,
            "--public",
            "--graded-ok",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    if target == LOGPROBS:
        assert report["ok"] and report["bits_per_byte"] is None
        assert re.search(expected, report["bpb_reason"]), report["bpb_reason"]
    else:
        assert not report["ok"] and report["score"]["passed"] == 0
        assert re.search(expected, report["reason"]), report["reason"]
        assert "\n" not in report["reason"]


def test_an_output_that_is_not_base64_fails_that_question_only(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    change = "m['outputs'] = ['***'] + m['outputs'][1:]"
    bundle = _tampering_bundle(make_bundle, GENERATE, change)
    report = grade_bundle(bundle, make_exam(code_questions(3)), phases=("generate",))
    assert report.ok and report.score.passed == 2
    assert any("not valid base64" in p for p in report.problems)
