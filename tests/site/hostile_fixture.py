"""A results folder whose every text is an attack (issue 50 item 1; test data).

Every string the loader accepts, in every file (tracks.json, protocol_fixes.json,
signing_keys.json, each result file: values and dict keys alike, at any depth) and in the
artifacts' text, is replaced by a payload that runs `__pwn(n)` if any page turns it into
markup: HTML tags and event handlers, markdown images with an `attr_list` of handlers,
`javascript:` links (inline, reference-style, autolinks), a raw HTML block after a blank
line, a table row break, an admonition. Which fields hold text is found, not listed: each
string is tried, and kept where the loader still accepts the file (a field with a pattern,
such as a run id or a hash, refuses it and keeps its value). So a field added to a model
later is attacked too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from results_factory import run_dict, track_dict, write_registry, write_run
from site_fixture import AUDIT_TEXT

from toolkit.results import signing
from toolkit.stats import load_results
from toolkit.tracks.model import RegistryError, load_fixes, load_tracks

# One line: what a field that must be one line can hold.
LINE = (
    'P<img src=x onerror="__pwn(1)"><svg onload=__pwn(2)>'
    '![i](x.png){: onerror="__pwn(3)" }[l](javascript:__pwn(4))'
    "<javascript:__pwn(5)><script>__pwn(6)</script>"
    '<a href="javascript:__pwn(7)">a</a> | </td></tr></table><iframe srcdoc="x">'
    "{: onmouseover=__pwn(8) } `c` *e* &lt;img src=x onerror=__pwn(9)&gt;"
)
# Many lines: blocks of their own.
PAYLOAD = (
    LINE + "\n\n<div onmouseover=__pwn(10)>d</div>\n\n[r]: javascript:__pwn(11)\n\n[r][]\n\n"
    '!!! note "<img src=x onerror=__pwn(12)>"\n    x\n\n# <img src=x onerror=__pwn(13)>\n'
)
# A file name cannot hold '/': this one is a result file's name (refused, and listed).
FILE_NAME = "P<img src=x onerror=__pwn(14)><svg onload=__pwn(15)>.json"


def poison(data: Any, accepts: Callable[[Any], bool], keep: tuple[str, ...] = ()) -> Any:
    """`data` (JSON) with each string value and key replaced by a payload wherever `accepts`
    still takes the whole document; tried one at a time, depth first. `keep`: top-level keys
    left alone (a result's run id and track name the file itself; their patterns refuse
    any payload)."""
    paths = [p for p in _strings(data, ()) if not p or _name(p[0]) not in keep]
    for path in paths:
        for payload in (PAYLOAD, LINE):
            trial = _replaced(data, path, f"{payload} #{len(str(path))}")
            if accepts(trial):
                data = trial
                break
    return data


def _name(step: Any) -> Any:
    return step[1] if isinstance(step, tuple) else step


def _strings(node: Any, path: tuple[Any, ...]) -> Any:
    if isinstance(node, str):
        yield path
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _strings(item, (*path, i))
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, (*path, key))
            yield (*path, ("key", key))


def _replaced(node: Any, path: tuple[Any, ...], text: str) -> Any:
    if not path:
        return text
    head, rest = path[0], path[1:]
    if isinstance(node, list):
        return [_replaced(v, rest, text) if i == head else v for i, v in enumerate(node)]
    if isinstance(head, tuple):  # a dict key
        return {(text if k == head[1] else k): v for k, v in node.items()}
    return {k: (_replaced(v, rest, text) if k == head else v) for k, v in node.items()}


def _registry_accepts(results: Path, tracks: Any, fixes: Any) -> bool:
    write_registry(results, tracks, fixes)
    try:
        load_fixes(results, load_tracks(results))
    except RegistryError:
        return False
    return True


def _rich_run(run_id: str, **over: Any) -> dict[str, Any]:
    """A run with every optional text the model has filled in (test data)."""
    run = run_dict(run_id, revision=2, **over)
    run.update(
        provider="prov",
        agent_version="1.0",
        finished_at="2026-11-22T11:00:00Z",
        model_free_suspect=True,
        weights_ablation={"percent": 10.0, "passed": 10, "total": 100},
        placement={"node": "node-1", "gpu": "gpu-0", "cpus": 4.0},
    )
    run["candidates"].append(
        {"id": "c9", "submitted_at": "2026-11-22T10:50:00Z", "elapsed_s": 3000.0,
         "sha256": "9" * 64, "packed_bytes": 10, "public_score": None, "error": "broke"}
    )  # fmt: skip
    run["config"].update(
        git_commit="abc",
        image_digests={"runner": "sha256:1", "grader": None},
        scaffold_version="0.1",
        scaffold_config_sha256="d" * 64,
        grading={"context_bytes": 1024, "mode": "greedy"},
        budget={"budget_s": 3600},
        train_data={"source": "corpus", "source_sha256": "e" * 64, "train_sha256": "f" * 64,
                    "val_sha256": "a" * 64, "train_bytes": 1, "val_bytes": 1},
    )  # fmt: skip
    run["usage"] = {"input_tokens": 1, "cost_usd": 0.5}
    return run


def make_hostile(results: Path) -> None:
    """Write the folder: a registry, signed and unsigned runs of every status, a legacy run,
    artifacts and a refused file, every text an attack."""
    fixes = [
        {"id": "fix-one", "track": "v1-test", "date": "2026-11-01", "title": "t",
         "description": "d", "revision": 2, "action": "legacy"}
    ]  # fmt: skip
    tracks = [track_dict(protocol_revision=2), track_dict("demo-test", demo=True)]
    tracks = poison(tracks, lambda t: _registry_accepts(results, t, fixes))
    fixes = poison(fixes, lambda f: _registry_accepts(results, tracks, f))
    write_registry(results, tracks, fixes)

    # `page` is named as a page would be (`.html`): its raw copy must not be served as one.
    artifacts = {"transcript": PAYLOAD * 3, "audit": AUDIT_TEXT + _audit_line(), "page": PAYLOAD}
    runs = [
        (_rich_run("sig0", model="m", effort="high"), True),
        (_rich_run("sig1", model="m", effort="high", seed=1, status="failed", passed=0), True),
        (_rich_run("inv0", model="m", effort="high", seed=2, status="invalid"), True),
        (_rich_run("uns0", model="u"), False),
        (run_dict("old0", model="o", revision=1), True),
    ]
    runs[2][0]["evidence"] = {"check": "harness-error", "detail": "x"}
    for run, signed in runs:
        path = results / run["track"] / f"{run['run_id']}.json"
        run["artifacts"] = {}
        for name, text in artifacts.items():
            rel = f"{run['run_id']}/{name}.{'html' if name == 'page' else 'txt'}"
            (path.parent / rel).parent.mkdir(parents=True, exist_ok=True)
            (path.parent / rel).write_text(text, encoding="utf-8")
            run["artifacts"][name] = rel

        def accepts(trial: Any, run_path: Path = path, signed: bool = signed) -> bool:
            _write(results, trial, signed)
            loaded = load_results(results, keep_going=True)
            return not loaded.refused and any(r.path == run_path for r in loaded.runs)

        _write(results, poison(run, accepts, keep=("run_id", "track")), signed)
    keys = json.loads((results / signing.KEYRING_FILE).read_text())
    for key in keys.get("keys", []):
        key["holder"] = LINE
    (results / signing.KEYRING_FILE).write_text(json.dumps(keys))
    (results / "v1-test" / FILE_NAME).write_text("{}")


def _audit_line() -> str:
    entry = {"argv": [PAYLOAD, {"b64": "PHNjcmlwdD5fX3B3bigxNik8L3NjcmlwdD4="}],
             "note": LINE, "seq": LINE, "start": LINE, "exit_code": LINE}  # fmt: skip
    return json.dumps(entry) + "\n" + PAYLOAD.replace("\n", " ") + "\n"


def _write(results: Path, run: dict[str, Any], signed: bool) -> None:
    if signed:
        write_run(results, run)
    else:
        path = results / run["track"] / f"{run['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run), encoding="utf-8")
