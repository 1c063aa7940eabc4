"""mkdocs hooks: the leaderboard site, generated from results/ at build time.

Thin on purpose: `toolkit.stats` validates the results and plans the site (which pages, with
what data); this hook only renders the plan's jinja templates (site/overrides/ari/) and hands
the pages and files to mkdocs. Bad input stops the build with the loader's one-line message
per bad file, which names the file and the field.

The results folder is `$ARI_RESULTS_DIR` when set (the tests point it at fixtures), otherwise
`results/` beside mkdocs.yml. A bad result file stops the build, with every bad file named in
one pass; `ARI_SKIP_BAD_RESULTS=1` publishes the rest and lists the refused files on the site.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from toolkit.grading import publish
from toolkit.results.model import ResultsError
from toolkit.results.published import UnsafePathError, copy_published
from toolkit.results.signing import trusted_list_of
from toolkit.site_policy import NO_SCRIPT_POLICY, inline_scripts, page_policy
from toolkit.stats import load_results
from toolkit.stats.site_plan import Copy, SitePlan, plan_site
from toolkit.stats.untrusted import anchor, markdown_text, site_path
from toolkit.tracks.model import RegistryError

TEMPLATES = Path(__file__).parent / "overrides" / "ari"
# Set to 1 to publish a site without the bad result files, listed on a page of their own.
SKIP_BAD_ENV = "ARI_SKIP_BAD_RESULTS"
MAINTAINERS = "maintainers/"
# The Docs section of the nav: every hand-written page under these folders, index first.
DOCS = (("Operators", "operators/"), ("Maintainers", MAINTAINERS), ("Security", "security/"))

# HTML that templates set aside with `{% filter stash %}`, by page, put back after markdown.
# Markdown has nothing to do inside a table or an SVG, and parsing thousands of tags through
# Python-Markdown's HTML handling was most of the build time on a large board.
_stashed: dict[str, dict[str, str]] = {}
# Run artifacts, linked (or copied) into the built site after the build: tens of thousands of
# files would otherwise each be opened, read and written through mkdocs' static-file copy.
_copies: list[Copy] = []


def results_dir(config: MkDocsConfig) -> Path:
    """`$ARI_RESULTS_DIR`, or results/ next to mkdocs.yml."""
    env = os.environ.get("ARI_RESULTS_DIR")
    if env:
        return Path(env)
    return Path(config.config_file_path).resolve().parent / "results"


def skip_bad_results() -> bool:
    """Whether `$ARI_SKIP_BAD_RESULTS` asks to publish the rest when a result file is bad."""
    return os.environ.get(SKIP_BAD_ENV, "").strip().lower() in ("1", "true", "yes")


def refusal(refused: list[str]) -> str:
    """Why the build stops: every bad result file, one line each, and the way to publish the
    rest (deliberately: a partial board is not the default)."""
    lines = [f"bad results: {line}" for line in refused]
    lines.append(
        f"{len(refused)} result file(s) refused; fix or remove them, or set {SKIP_BAD_ENV}=1 "
        "to publish the rest with these listed as refused"
    )
    return "\n".join(lines)


# --- formatting filters (presentation only; the numbers come from toolkit.stats) ------------


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}"


def _megabytes(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e6:.2f} MB"


def _duration(seconds: float | None) -> str:
    """Human duration: '1 hour', '20 minutes', '90 seconds'."""
    if seconds is None:
        return "—"
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    if seconds >= 120:
        return f"{seconds / 60:.1f} minutes"
    return f"{seconds:g} seconds"


@jinja2.pass_context
def _stash(context: jinja2.runtime.Context, html: str) -> markupsafe.Markup:
    """Set `html` aside for this page; markdown sees only a comment marking its place."""
    store: dict[str, str] = context["_stash"]
    key = f"<!-- ari-stash-{len(store)} -->"
    store[key] = str(html)
    return markupsafe.Markup(f"\n\n{key}\n\n")


def environment(markdown: bool = True) -> jinja2.Environment:
    """The jinja environment of the site's page templates: `markdown` for the pages that
    markdown renders, where every value is made plain text at this one place
    (`toolkit.stats.untrusted.markdown_text`, jinja's `finalize`); otherwise (the log pages,
    HTML that markdown never reads) jinja's HTML escaping is that boundary."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=markdown_text if markdown else None,
    )
    env.filters.update(
        pct=_pct,
        signed=_signed,
        mb=_megabytes,
        duration=_duration,
        site_path=site_path,
        anchor=anchor,
        thousands=lambda n: f"{n:,}",
        trusted_list=trusted_list_of,  # which pinned list holds a run's signing key
        # front matter values: JSON strings are valid YAML and survive quotes and colons
        # The theme prints page titles unescaped, so they are HTML-escaped here.
        yaml=lambda s: markupsafe.Markup(json.dumps(str(markupsafe.escape(s)))),
        stash=_stash,
    )
    # The published bounds of a hidden grading, in the words of the code that enforces them.
    env.globals["published"] = {
        "bpb": publish.BPB_WORDS,
        "time": publish.TIME_WORDS,
        "ablation": publish.ABLATION_WORDS,
    }
    return env


# --- mkdocs events --------------------------------------------------------------------------


def _add(files: Files, made: File) -> None:
    there = files.get_file_from_path(made.src_uri)
    if there is not None and there.generated_by:  # two names from results/ that meet
        raise PluginError(f"bad results: two generated pages would both be {made.src_uri}")
    if there is not None:
        raise PluginError(f"site/docs/{made.src_uri} clashes with a generated page; remove it")
    files.append(made)


def _render(plan: SitePlan, files: Files, config: MkDocsConfig) -> None:
    env, html_env = environment(), environment(markdown=False)
    html_env.globals["csp"] = NO_SCRIPT_POLICY
    _stashed.clear()
    for page in plan.pages:
        store: dict[str, str] = {}
        text = env.get_template(page.template).render(page.context, _stash=store)
        _stashed[page.src_uri] = store
        _add(files, File.generated(config, page.src_uri, content=text))
    for html in plan.html_pages:
        text = html_env.get_template(html.template).render(html.context)
        _add(files, File.generated(config, html.src_uri, content=text))
    _copies[:] = plan.copies
    for download in plan.texts:
        _add(files, File.generated(config, download.src_uri, content=download.content))


def _escape_titles(nav: Any) -> Any:
    """Nav titles come from the registry (track titles); the theme prints them unescaped."""
    if isinstance(nav, list):
        return [_escape_titles(item) for item in nav]
    if isinstance(nav, dict):
        return {str(markupsafe.escape(k)): _escape_titles(v) for k, v in nav.items()}
    return nav


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Load results/, plan the site, add every generated page and file, build the nav."""
    source = results_dir(config)
    try:
        results = load_results(source, keep_going=True)
    except (ResultsError, RegistryError) as exc:
        # The message names the file (or the missing folder) and the field already.
        raise PluginError(f"bad results: {exc}") from None
    if results.refused and not skip_bad_results():
        raise PluginError(refusal(results.refused))
    plan = plan_site(results)
    _render(plan, files, config)
    nav: list[Any] = _escape_titles(plan.nav)
    docs: list[Any] = []
    for title, folder in DOCS:
        pages = sorted(
            f.src_uri
            for f in files.documentation_pages()
            if f.src_uri.startswith(folder) and not f.generated_by
        )
        index = f"{folder}index.md"
        if pages:
            docs.append(
                {title: ([index] if index in pages else []) + [p for p in pages if p != index]}
            )
    if docs:
        nav.append({"Docs": docs})
    config.nav = nav
    return files


# The theme's inline scripts, each rendered as a page at any depth renders it (`base_url` is
# part of one of them), so that the policy can name them by hash; nothing from results/ is in
# them. A page of the site is at most this deep.
THEME_SCRIPTS = "partials/javascripts/"
_DEPTHS = (".", "..", "../..", "../../..", "/")


def theme_policy(env: jinja2.Environment, config: MkDocsConfig) -> str:
    """The Content-Security-Policy of the site's pages (`toolkit.site_policy`): the theme's
    own inline scripts, named by hash, and no other."""
    hashes: list[str] = []
    features = config.theme.get("features") or []
    names = [n for n in env.list_templates() if n.startswith(THEME_SCRIPTS)]
    for name in names:
        template = env.get_template(name)
        for base_url in _DEPTHS:
            try:
                text = template.render(config=config, base_url=base_url, features=features)
            except jinja2.TemplateError:  # needs a page's context: not one of ours to name
                continue
            hashes += inline_scripts(text)
    return page_policy(hashes)


def on_env(env: jinja2.Environment, config: MkDocsConfig, **_: Any) -> jinja2.Environment:
    """Every page's policy, for `site/overrides/main.html` to put at the top of its head."""
    env.globals["ari_csp"] = theme_policy(env, config)
    return env


def on_page_content(html: str, page: Page, **_: Any) -> str:
    """Put the HTML that the page's template set aside back at its markers."""
    for key, block in _stashed.get(page.file.src_uri, {}).items():
        html = html.replace(key, block, 1)
    return html


def on_post_build(config: MkDocsConfig, **_: Any) -> None:
    """Put the run artifacts into the site, each a copy of its own.

    Never a link: a hard link would give the artifact a second name, which the loader refuses
    (it cannot tell that name from one outside results/), and each is read without following
    a link out of results/ (`toolkit.results.published`), as the loader checked it."""
    site = Path(config.site_dir)
    made: set[Path] = set()
    for copy in _copies:
        target = site / copy.src_uri
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.unlink(missing_ok=True)
        try:
            copy_published(copy.root, copy.rel, target)
        except UnsafePathError as exc:  # changed since it was loaded
            raise PluginError(f"bad results: {exc}") from None
