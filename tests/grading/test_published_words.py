"""One source for what a hidden grading publishes: every page, registry text and help text
that states a published precision or bound says what `toolkit.grading.publish` enforces.

Issue #38: the security page, the protocol-fixes page (`results/protocol_fixes.json`) and
`toolkit grade -h` still said bits per byte was published to 3 decimals, and that exit
statuses were part of a failure's reason, after both had been made coarse.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import click

from toolkit.cli import cli
from toolkit.grading import publish
from toolkit.run.final_grading import grading_charged_reason
from toolkit.sandbox.base import SandboxError, SandboxTeardownTimeout

REPO = Path(__file__).resolve().parents[2]
CHANNELS = REPO / "site" / "docs" / "security" / "channels.md"


def _flat(text: str) -> str:
    """Text with its line breaks and indents as single spaces (pages and help are wrapped)."""
    return " ".join(text.split())


def _help_texts() -> dict[str, str]:
    """Every command's `-h` text, by its command line."""
    out: dict[str, str] = {}

    def walk(command: click.Command, name: str, parent: click.Context | None) -> None:
        # With the command's own settings, as `make_context` gives them: click keeps the help
        # option a command first made, and one made under a bare context (no "-h") stays so
        # for every later test on the worker (`toolkit run -h` would then be refused).
        ctx = click.Context(command, info_name=name, parent=parent, **command.context_settings)
        out[name] = command.get_help(ctx)
        if isinstance(command, click.Group):
            for sub_name, sub in command.commands.items():
                walk(sub, f"{name} {sub_name}", ctx)

    walk(cli, "toolkit", None)
    return out


def _texts() -> dict[str, str]:
    """Every published text: doc pages, site templates, the registry's fix descriptions, the
    README and every help text."""
    texts = {str(p.relative_to(REPO)): p.read_text("utf-8") for p in REPO.glob("site/**/*.md")}
    texts |= {str(p.relative_to(REPO)): p.read_text("utf-8") for p in REPO.glob("site/**/*.html")}
    texts["README.md"] = (REPO / "README.md").read_text("utf-8")
    fixes = json.loads((REPO / "results" / "protocol_fixes.json").read_text("utf-8"))
    texts["results/protocol_fixes.json"] = "\n".join(f["description"] for f in fixes)
    texts |= {f"{name} -h": text for name, text in _help_texts().items()}
    return {name: _flat(text) for name, text in texts.items()}


def test_no_text_states_a_precision_the_code_does_not_enforce() -> None:
    stated = {
        name: m.group(0)
        for name, text in _texts().items()
        for m in re.finditer(r"\b(\d+|one|two|three|four|five|six) decimals?\b", text)
    }
    assert stated == {}


def test_the_pages_that_state_the_bounds_use_the_codes_words() -> None:
    texts = _texts()
    bpb = publish.BPB_WORDS
    for name in (
        "site/docs/security/index.md",
        "site/docs/security/channels.md",
        "site/docs/operators/how-it-works.md",
        "results/protocol_fixes.json",
        "toolkit grade -h",
    ):
        assert bpb in texts[name], name
    for name in ("site/docs/security/index.md", "site/docs/operators/how-it-works.md"):
        assert publish.TIME_WORDS in texts[name], name
        assert publish.ABLATION_WORDS in texts[name], name
    assert publish.ABLATION_WORDS in texts["toolkit grade -h"]
    assert publish.TIME_WORDS in texts["toolkit grade -h"]
    # The site's own methodology page takes them from the code (rendered: tests/site).
    methodology = texts["site/overrides/ari/methodology.md"]
    for key in ("bpb", "time", "ablation"):
        assert f"{{{{ published.{key} }}}}" in methodology
    # The time words are written out: they follow the edges they describe.
    assert publish.TIME_EDGES_S == (0.0, 60.0, 600.0), "update publish.TIME_WORDS"


def test_every_reason_a_text_quotes_is_one_a_hidden_grading_can_publish() -> None:
    starts = ("load()", "generate()", "next_byte_logprobs()", "crashed")
    quoted = {
        (name, q)
        for name, text in _texts().items()
        for q in re.findall(r'"([^"]{4,200})"', text)
        if q.startswith(starts)
    }
    assert quoted, "no text quotes a reason: the check would check nothing"
    assert {(n, q) for n, q in quoted if q not in publish.HIDDEN_REASONS} == set()


def test_the_channels_page_adds_up_what_the_code_allows() -> None:
    page = _flat(CHANNELS.read_text("utf-8"))
    bpb = len(publish.bpb_values()) + 1  # and null
    times = len(publish.TIME_EDGES_S)
    ablated = publish.ABLATION_PARTS + 1
    charged = len(
        {
            grading_charged_reason("c001", cls.__new__(cls))
            for cls in (SandboxTeardownTimeout, SandboxError, RuntimeError)
        }
    )
    reasons = len(publish.PHASE1_REASONS) + charged
    rows = {
        "bits_per_byte": f"({len(publish.bpb_values())} values), or null when phase 2 failed: "
        f"{bpb} | {publish.bits(bpb):.2f}",
        "grading time": f"600 (longer): {times} | {publish.bits(times):.2f}",
        "ablation": f"at most {ablated} | {publish.bits(ablated):.2f}",
        "reasons": f"one of {len(publish.PHASE1_REASONS)} fixed phrases (below), or one of "
        f'{charged} fixed "charged to the bundle" reasons: {reasons} | '
        f"{publish.bits(reasons):.2f}",
        "valid": f"{bpb} × {times} × {ablated} = {bpb * times * ablated:,} | "
        f"{publish.bits(bpb * times * ablated):.2f}",
        "failed": f"{reasons} × {times} = {reasons * times} | {publish.bits(reasons * times):.2f}",
    }
    for what, row in rows.items():
        assert row in page, what
    either = bpb * times * ablated + reasons * times
    assert f"= {either:,} | **{math.log2(either):.2f}**" in page
    security = _flat((REPO / "site" / "docs" / "security" / "index.md").read_text("utf-8"))
    assert f"at most about {math.log2(either):.1f} bits all together" in security
