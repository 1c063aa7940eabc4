"""The `toolkit` command line: one click group; each command lives in `toolkit/commands/`."""

from __future__ import annotations

import click

from toolkit import __version__

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="toolkit")
def cli() -> None:
    """ARI Bench toolkit: build the exam, run agents, grade bundles, publish results.

    \b
    Examples:
      toolkit build-exam --bank exam_builder/banks/public/demo --out /tmp/demo-exam
      toolkit run --agent scripted --track demo-cpu-3 --seed 0 --results /tmp/ari-results
      toolkit grade path/to/bundle --exam /tmp/demo-exam/exam.jsonl
      toolkit leaderboard --track demo-cpu-3 --results /tmp/ari-results
    """


# Commands register themselves here, one import each (nothing imports this module).
# (added by each command's module below)
from toolkit.commands.leaderboard import leaderboard_command  # noqa: E402

cli.add_command(leaderboard_command)
from toolkit.commands.exam import build_exam_command  # noqa: E402
from toolkit.commands.verify_exam import verify_exam_command  # noqa: E402

cli.add_command(build_exam_command)
cli.add_command(verify_exam_command)
from toolkit.commands.grade import grade_command  # noqa: E402

cli.add_command(grade_command)
from toolkit.commands import runs_live  # noqa: E402, F401  (adds runs list/show/tail/kill)
from toolkit.commands.run import run_command  # noqa: E402
from toolkit.commands.runs import runs_group  # noqa: E402

cli.add_command(run_command)
cli.add_command(runs_group)
from toolkit.commands.images import images_group  # noqa: E402

cli.add_command(images_group)

from toolkit.commands.campaign import campaign_group  # noqa: E402
from toolkit.commands.doctor import doctor_command  # noqa: E402

cli.add_command(doctor_command)
from toolkit.commands.tracks import tracks_group  # noqa: E402

cli.add_command(tracks_group)
from toolkit.commands.view import view_command  # noqa: E402

cli.add_command(view_command)

cli.add_command(campaign_group)
from toolkit.commands.keys import keys_group  # noqa: E402

cli.add_command(keys_group)
from toolkit.commands.data import data_group  # noqa: E402

cli.add_command(data_group)
from toolkit.commands.learn import learn_exam_command  # noqa: E402

cli.add_command(learn_exam_command)


def main() -> None:
    cli()
