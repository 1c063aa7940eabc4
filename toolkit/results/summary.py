"""What the CLI says about a result it wrote: the summary, where the file went (a git working
tree is one `git add` away from publishing it), and whether its signature is trusted.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from rich.console import Console

from toolkit.results.model import ResultsError, RunResult, load_run
from toolkit.results.signing import SigningError, check, load_folder_keyring, trusted_keyring


def print_result(result: RunResult, path: Path, console: Console) -> None:
    colour = {"valid": "green", "failed": "yellow", "invalid": "red"}[result.status]
    s = result.score
    # An invalid run never scores, not even 0% (as `runs list` and the board say it): a dash.
    score = "—" if result.status == "invalid" else f"{s.percent:.1f}% ({s.passed}/{s.total})"
    bpb = None if result.status == "invalid" else result.bits_per_byte
    console.print(
        f"[bold {colour}]{result.status}[/bold {colour}] · score {score} · bpb "
        f"{'—' if bpb is None else f'{bpb:.2f}'}"
    )
    if result.status_reason:
        console.print(f"reason: {result.status_reason}")
    if result.weights_ablation is not None:
        a = result.weights_ablation
        suspect = " · model-free suspect" if result.model_free_suspect else ""
        console.print(f"weights ablation: {a.passed}/{a.total}{suspect}")
    promoted = result.promoted.id if result.promoted else "none"
    public = result.best_public_score
    console.print(
        f"candidates {len(result.candidates)} · promoted {promoted} · best public "
        f"{'—' if public is None else f'{public:.1f}%'} · used {result.timings.used_s:.0f}s of "
        f"{result.timings.budget_s:.0f}s"
    )
    console.print(f"result: {path.resolve()}")


def say_interrupted(path: Path, console: Console) -> None:
    """What a run stopped from outside recorded (`path`: its result), on its own terminal: the
    status and the reason (by what, during which step), or that nothing was recorded."""
    try:
        result = load_run(path)
    except (OSError, ResultsError):
        console.print("interrupted before the run started: nothing was recorded")
        return
    print_result(result, path, console)


def git_worktree_of(path: Path) -> Path | None:
    """The git working tree that `path` lies in (its top folder), or None."""
    for folder in [path.resolve(), *path.resolve().parents]:
        if (folder / ".git").exists():
            return folder
    return None


def _git_ignored(tree: Path, path: Path) -> bool:
    """Whether git ignores `path` in `tree` (False when git cannot tell: then we warn)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(tree), "check-ignore", "-q", str(path)],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def warn_if_in_worktree(results_dir: Path, track_id: str, demo: bool, console: Console) -> None:
    """A run written into a git working tree (the repository's committed results/, say) is one
    `git add` away from being published: say so, loudly, with where it went. A folder git
    ignores (`make demo` writes under .ari/) is not."""
    tree = git_worktree_of(results_dir)
    where = (results_dir / track_id).resolve()
    if tree is None or _git_ignored(tree, where):
        return
    kind = "demo-track " if demo else ""
    console.print(
        f"[bold yellow]note:[/bold yellow] this {kind}run is written into the git working tree "
        f"{tree}, at {where}: commit it only to publish it; for a try-out pass a scratch folder "
        "(--results /tmp/ari-results)"
    )


def note_untrusted_key(path: Path, results_dir: Path, console: Console) -> None:
    """The run is signed; say so when no pinned key accepts the signature."""
    try:
        folder = load_folder_keyring(results_dir)
        verdict = check(path.read_bytes(), trusted_keyring(()), folder)
    except (OSError, SigningError) as exc:
        console.print(f"[bold yellow]note:[/bold yellow] cannot check the signature: {exc}")
        return
    if not verdict.verified:
        console.print(
            f"[bold yellow]note:[/bold yellow] {verdict.reason}: readers of {results_dir} will "
            "see this run as unverified unless they pin this machine's key: `toolkit keys pin "
            "--file KEYS.json`, then --keys KEYS.json or ARI_TRUSTED_KEYS=KEYS.json (a "
            "maintainer adds it to the toolkit's own pinned_keys.json)"
        )
