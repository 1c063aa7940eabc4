"""The data side of the leaderboard site: which pages exist, what each shows, where files go.

`plan_site(results)` is a pure function from a validated `ResultsSet` to a `SitePlan`: pages
(a jinja template name and its context), verbatim copies of run artifacts, generated text files
(CSV / JSON downloads) and the navigation. `site/hooks.py` only renders the templates and hands
the files to mkdocs, so everything here can be tested without mkdocs.

URLs are output paths relative to the site root (the site is built with
`use_directory_urls: false`, so it also works opened from disk, offline). Templates prefix them
with `root`, the way back from the page to the site root.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path, PurePosixPath
from typing import Any

from toolkit import __version__
from toolkit.results.model import RunResult, Usage, json_schema
from toolkit.results.published import read_head
from toolkit.stats.board import Row, RunEntry, leaderboard
from toolkit.stats.chart import MeansChart, TimelineChart, means_chart, timeline_chart
from toolkit.stats.cost import CostChart, cost_chart
from toolkit.stats.export import COLUMNS, to_csv, to_json
from toolkit.stats.loading import LoadedRun, ResultsSet
from toolkit.stats.log_pages import log_pages, pager
from toolkit.tracks.model import ProtocolFix, Track

# What the log pages show of a run's artifacts, however large they are: the first bytes of
# each, up to a budget per run (a 500 MB transcript would otherwise make thousands of pages
# and gigabytes of memory). The page says what is left out; the raw copy holds it all.
SHOWN_BYTES = 2 * 1024 * 1024  # of one artifact: about 22 pages
RUN_SHOWN_BYTES = 8 * 1024 * 1024  # of all of one run's artifacts together
RAW_LIMIT = 64 * 1024 * 1024  # an artifact larger than this is not copied into the site
TOP_ROWS = 5  # rows shown on the home page per track
# A raw artifact keeps its name only when a web server would serve it as text or data (or,
# with no suffix, as bytes to download): any other name (`x.html`, `x.svg`, `x.js`) gets
# `.txt` added, so that no artifact is served as a page or a script of the site.
RAW_SUFFIXES = ("", ".txt", ".log", ".json", ".jsonl", ".csv", ".gz")

# The site's sections, in navigation order: the mkdocs nav and the log pages' header both.
REFUSED_PAGE = "refused.md"
SECTIONS: list[tuple[str, str]] = [
    ("Home", "index.md"),
    ("Leaderboards", "leaderboards/index.md"),
    ("Methodology", "methodology.md"),
    ("Protocol fixes & reruns", "protocol-fixes.md"),
    ("Limitations", "limitations.md"),
    ("Downloads", "downloads.md"),
]


@dataclass
class Page:
    """A generated markdown page: `template` rendered with `context` into `src_uri`."""

    src_uri: str
    template: str
    context: dict[str, Any]

    @property
    def url(self) -> str:
        return html_url(self.src_uri)


@dataclass
class HtmlPage:
    """A generated standalone HTML file (large artifact views skip markdown for speed)."""

    src_uri: str
    template: str
    context: dict[str, Any]


@dataclass
class Copy:
    """A file put into the site unchanged (a run artifact): a copy, never a link, read as
    `toolkit.results.published` reads (no link followed out of the results folder)."""

    src_uri: str
    root: Path
    """The results folder."""
    rel: str
    """The artifact's path relative to `root`."""


@dataclass
class Text:
    """A generated download (CSV, JSON)."""

    src_uri: str
    content: str


@dataclass
class TrackBoard:
    """One track's leaderboard and where its pages and downloads live."""

    track: Track
    rows: list[Row]
    chart: MeansChart
    top_chart: MeansChart  # the leading rows only, for the home page
    cost: CostChart | None  # score against cost per run (None: no row reported either)
    url: str
    csv_url: str
    json_url: str

    @property
    def ranked(self) -> list[Row]:
        return [r for r in self.rows if r.rank is not None]

    @property
    def unscored(self) -> list[Row]:
        return [r for r in self.rows if not r.legacy and r.rank is None]

    @property
    def legacy(self) -> list[Row]:
        return [r for r in self.rows if r.legacy]

    @property
    def set_apart(self) -> int:
        """Runs listed on row pages but not counted: repeats of a seed, runs off the rules."""
        return sum(len(r.repeats) + len(r.off_rules) for r in self.rows)

    @property
    def unverified(self) -> int:
        """Runs whose files are not as a pinned key signed them: listed, never counted."""
        return sum(len(r.unverified) for r in self.rows)

    @property
    def awaiting(self) -> int:
        return sum(len(r.awaiting_rerun) for r in self.rows)

    @property
    def runs(self) -> int:
        """The board's runs whose files hold (an unverified file counts in no total)."""
        return sum(len(r.run_ids) for r in self.rows) - self.unverified

    @property
    def official_rows(self) -> int:
        return sum(1 for r in self.ranked if not r.provisional)

    def row_src(self, row: Row) -> str:
        """The row page's source path (for markdown links, which mkdocs checks)."""
        return f"rows/{self.track.id}/{row.slug}.md"

    def row_url(self, row: Row) -> str:
        """The row page's output path (for HTML links)."""
        return html_url(self.row_src(row))


@dataclass
class ArtifactView:
    """A run artifact: its raw copy and its paged views."""

    name: str
    raw_url: str | None  # None: too large to copy into the site (`RAW_LIMIT`)
    view_url: str  # the log page (and anchor) where it starts
    parts: int  # how many parts it was cut into
    size: int
    shown: int  # bytes of it on the log pages (`SHOWN_BYTES`)


@dataclass
class RunView:
    """One run on its row's page."""

    run: RunResult
    entry: RunEntry  # whether it counts in the row, and why not
    timeline: TimelineChart
    artifacts: list[ArtifactView]
    best_public: float | None

    @property
    def tokens(self) -> int | None:
        """Every token of the run's model calls, where it reported any."""
        return usage_totals([self.run]).tokens


USAGE_PARTS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
)


@dataclass
class UsageTotals:
    """A row's usage: each part summed over the runs that reported it.

    A part no run reported stays None (shown as not reported, never as 0). `reported` counts
    the runs that reported any part, `runs` all the row's runs (counted or not: each one spent
    what it spent)."""

    parts: dict[str, int | float | None]
    reported: int
    runs: int

    @property
    def tokens(self) -> int | None:
        """Every token the provider handled (the parts do not overlap: see `Usage`)."""
        known = [v for k, v in self.parts.items() if k != "cost_usd" and v is not None]
        return int(sum(known)) if known else None


def usage_parts(usage: Usage) -> dict[str, int | float | None]:
    return {part: getattr(usage, part) for part in USAGE_PARTS}


def usage_totals(runs: list[RunResult]) -> UsageTotals:
    """The sum of each usage part over `runs`."""
    parts: dict[str, int | float | None] = dict.fromkeys(USAGE_PARTS)
    reported = 0
    for run in runs:
        own = usage_parts(run.usage)
        if any(v is not None for v in own.values()):
            reported += 1
        for part, value in own.items():
            if value is not None:
                parts[part] = (parts[part] or 0) + value
    return UsageTotals(parts, reported, len(runs))


@dataclass
class SitePlan:
    """Everything the hook has to render or copy, and the navigation."""

    pages: list[Page] = field(default_factory=list)
    html_pages: list[HtmlPage] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    nav: list[Any] = field(default_factory=list)


def html_url(src_uri: str) -> str:
    """The output path of a markdown page (`a/b.md` -> `a/b.html`)."""
    return str(PurePosixPath(src_uri).with_suffix(".html"))


def root_of(src_uri: str) -> str:
    """The relative way from a page back to the site root ('' or '../..' + '/')."""
    depth = len(PurePosixPath(src_uri).parts) - 1
    return "../" * depth


def current_track(tracks: dict[str, Track]) -> Track | None:
    """The track the home page leads with: the first official (non-demo) one registered."""
    official = [t for t in tracks.values() if not t.demo]
    listed = official or list(tracks.values())
    return listed[0] if listed else None


def _artifacts(loaded: LoadedRun, results: ResultsSet, plan: SitePlan, back: str) -> list[Any]:
    run = loaded.result
    if not run.artifacts:
        return []
    root_dir = Path(os.path.abspath(results.results_dir))
    texts: list[tuple[str, str]] = []
    raws: dict[str, tuple[str | None, int, int]] = {}
    budget = RUN_SHOWN_BYTES
    for name in sorted(run.artifacts):
        rel = loaded.artifact_path(name).relative_to(root_dir).as_posix()
        data, size = read_head(results.results_dir, rel, min(SHOWN_BYTES, budget))
        if len(data) < size and b"\n" in data:  # cut at a line's end, and say so
            data = data[: data.rfind(b"\n") + 1]
        budget -= len(data)
        raw: str | None = None
        if size <= RAW_LIMIT:
            raw = f"runs/{raw_name(rel)}"
            plan.copies.append(Copy(src_uri=raw, root=results.results_dir, rel=rel))
        text = data.decode("utf-8", errors="replace")
        if len(data) < size:
            where = "the raw file has them all" if raw else "too large to publish here"
            text += f"[... {size - len(data):,} more bytes of {size:,} not shown ({where})]\n"
        texts.append((name, text))
        raws[name] = (raw, size, len(data))
    pages = log_pages(texts)
    urls = [f"logs/{run.track}/{run.run_id}/{i + 1}.html" for i in range(len(pages))]
    first: dict[str, str] = {}
    for i, sections in enumerate(pages):
        root = root_of(urls[i])
        for section in sections:
            first.setdefault(section.name, f"{urls[i]}#{section.anchor}")
        plan.html_pages.append(
            HtmlPage(
                src_uri=urls[i],
                template="logs.html",
                context={
                    "root": root,
                    "run": run,
                    "sections": sections,
                    "page": i + 1,
                    "pages": len(pages),
                    "prev": root + urls[i - 1] if i > 0 else None,
                    "next": root + urls[i + 1] if i + 1 < len(pages) else None,
                    "pager": pager(urls, i + 1, root),
                    "raws": {name: root + url for name, (url, _, _) in raws.items() if url},
                    "row_url": root + back,
                    "sections_nav": [(title, root + html_url(src)) for title, src in SECTIONS],
                },
            )
        )
    return [
        ArtifactView(
            name=name,
            raw_url=raws[name][0],
            view_url=first[name],
            parts=max(s.parts for p in pages for s in p if s.name == name),
            size=raws[name][1],
            shown=raws[name][2],
        )
        for name, _ in texts
    ]


def raw_name(rel: str) -> str:
    """Where the raw copy of the artifact `rel` goes in the site (see `RAW_SUFFIXES`)."""
    path = PurePosixPath(rel)
    if path.suffix.lower() in RAW_SUFFIXES:
        return rel
    if len((path.name + ".txt").encode()) > 255:  # a file name the system would refuse
        digest = hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return str(path.with_name(f"{digest}.txt"))
    return f"{rel}.txt"


def _fix_for(fixes: list[ProtocolFix], row: Row) -> ProtocolFix | None:
    return next((f for f in fixes if f.id == row.superseded_by and f.track == row.track), None)


def last_updated(results: ResultsSet) -> str | None:
    """The date (UTC) of the newest published run whose file holds (`LoadedRun.trusted`: an
    unsigned file dated 2999 sets nothing): when the board last changed."""
    times = [r.result.finished_at or r.result.started_at for r in results.trusted_runs]
    if not times:
        return None
    newest = max(t if t.tzinfo else t.replace(tzinfo=UTC) for t in times)
    return f"{newest.astimezone(UTC):%Y-%m-%d}"


def refused_lines(results: ResultsSet) -> list[str]:
    """Each refused result file's line, its path relative to the results folder (the
    publisher's own folder names stay off the site)."""
    prefix = f"{results.results_dir}{os.sep}"
    return [p.replace(prefix, "") for p in results.refused]


def agents_used(results: ResultsSet) -> list[str]:
    """The agent scaffolds that produced the published runs (the limitations page says so)."""
    return sorted({r.result.agent for r in results.trusted_runs})


def plan_site(results: ResultsSet) -> SitePlan:
    """Plan every page and file of the site from validated results."""
    plan = SitePlan()
    tracks = list(results.tracks.values())
    boards: dict[str, TrackBoard] = {}
    for track in tracks:
        rows = leaderboard(results, track)
        ranked = [r for r in rows if r.rank is not None]
        boards[track.id] = TrackBoard(
            track=track,
            rows=rows,
            chart=means_chart(rows),
            top_chart=means_chart(ranked[:TOP_ROWS]),
            cost=cost_chart(rows),
            url=f"leaderboards/{track.id}.html",
            csv_url=f"downloads/{track.id}.csv",
            json_url=f"downloads/{track.id}.json",
        )
        plan.texts.append(Text(f"downloads/{track.id}.csv", to_csv(rows)))
        plan.texts.append(Text(f"downloads/{track.id}.json", to_json(rows, [track])))
    all_rows = [r for b in boards.values() for r in b.rows]
    plan.texts.append(Text("downloads/leaderboard.csv", to_csv(all_rows)))
    plan.texts.append(Text("downloads/leaderboard.json", to_json(all_rows, tracks)))
    plan.texts.append(Text("downloads/run-result.schema.json", json_schema()))

    common: dict[str, Any] = {
        "tracks": tracks,
        "boards": boards,
        "current": current_track(results.tracks),
        "fixes": results.fixes,
        "columns": COLUMNS,
        "total_runs": len(results.trusted_runs),
        "toolkit_version": __version__,
        "top_rows": TOP_ROWS,
        "last_updated": last_updated(results),
        "agents_used": agents_used(results),
        "refused": refused_lines(results),
    }

    def page(src_uri: str, template: str, **context: Any) -> Page:
        made = Page(src_uri, template, {**common, "root": root_of(src_uri), **context})
        plan.pages.append(made)
        return made

    page("index.md", "home.md")
    page("methodology.md", "methodology.md")
    page("leaderboards/index.md", "leaderboards.md")
    for board in boards.values():
        page(f"leaderboards/{board.track.id}.md", "leaderboard.md", board=board)
        for row in board.rows:
            src = board.row_src(row)
            runs = []
            for entry in row.runs:
                loaded = results.run(entry.run_id)
                runs.append(
                    RunView(
                        run=loaded.result,
                        entry=entry,
                        timeline=timeline_chart(loaded.result),
                        artifacts=_artifacts(loaded, results, plan, board.row_url(row)),
                        best_public=loaded.result.best_public_score,
                    )
                )
            # An unverified run's usage is its file's word only: in no total.
            usage = usage_totals([rv.run for rv in runs if rv.entry.role != "unverified"])
            page(
                src,
                "row.md",
                board=board,
                row=row,
                runs=runs,
                usage=usage,
                fix=_fix_for(results.fixes, row),
            )
    page("protocol-fixes.md", "fixes.md")
    page("limitations.md", "limitations.md")
    page("downloads.md", "downloads.md")

    titles = [b.track.title for b in boards.values()]
    boards_nav = [{"Overview": "leaderboards/index.md"}] + [
        # Two tracks of one title (a track and its successor) are told apart by their ids.
        {_nav_title(b.track.title, b.track.id, titles): f"leaderboards/{b.track.id}.md"}
        for b in boards.values()
    ]
    plan.nav = [{title: boards_nav if title == "Leaderboards" else src} for title, src in SECTIONS]
    if results.refused:  # published on purpose without them (ARI_SKIP_BAD_RESULTS): say so
        page(REFUSED_PAGE, "refused.md")
        plan.nav.append({"Refused result files": REFUSED_PAGE})
    return plan


def _nav_title(title: str, track_id: str, titles: list[str]) -> str:
    """A track's title in the navigation: with its id when another track has the same title."""
    return f"{title} ({track_id})" if titles.count(title) > 1 else title
