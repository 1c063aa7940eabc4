"""The campaign file: what it accepts, and one line naming the field for what it does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.campaign.conftest import toolkit, write_campaign
from toolkit.campaign.config import CampaignError, load_campaign_file
from toolkit.campaign.plan import keys_of
from toolkit.campaign.setup import open_campaign


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "campaign.toml"
    path.write_text(text)
    return path


def test_a_full_campaign_file_and_its_keys(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, seeds=[0], budget=10)
    path.write_text(
        path.read_text().replace("seeds = [0]\n", "")  # default: the track's seeds_required
    )
    campaign = open_campaign(path)
    assert campaign.file.results == tmp_path / "results"  # relative to the file
    keys = keys_of(campaign.file, campaign.track)
    assert [(k.model, k.effort, k.seed) for k in keys] == [
        ("scripted-baseline", None, s) for s in range(campaign.track.seeds_required)
    ]


BAD = [
    ('agent = "scripted"\n[[models]]\nname = "x"\n', "field 'track'"),
    ('track = "demo-cpu-3"\nagent = "nope"\n[[models]]\nname = "x"\n', "field 'agent'"),
    ('track = "demo-cpu-3"\nagent = "scripted"\nmodels = []\n', "field 'models'"),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\nattempts = 0\n[[models]]\nname = "x"\n',
        "field 'attempts'",
    ),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\nseeds = [1, 1]\n[[models]]\nname = "x"\n',
        "field 'seeds'",
    ),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\n[[models]]\nname = "x"\nefforts = ["a", "a"]\n',
        "field 'models.0.efforts'",
    ),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\n[[models]]\nname = "x"\nprovider = "openai"\n',
        "field 'models.0'",
    ),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\ntypo = 1\n[[models]]\nname = "x"\n',
        "field 'typo'",
    ),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\n'
        '[[models]]\nname = "x"\n[[models]]\nname = "x"\n',
        "listed twice",
    ),
    ('track = "demo-cpu-3"\nagent = \n', "invalid TOML"),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\ncpus_per_run = 0\n[[models]]\nname = "x"\n',
        "field 'cpus_per_run'",
    ),
    (
        'track = "demo-cpu-3"\nagent = "scripted"\n[[models]]\nname = "x"\nkey_env = "A KEY"\n',
        "field 'models.0.key_env'",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_bad_campaign_files_name_the_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(CampaignError) as info:
        load_campaign_file(path)
    message = str(info.value)
    assert expected in message and str(path) in message and "\n" not in message


def test_the_track_decides_what_only_it_can(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, seeds=[0], budget=10)
    text = path.read_text()
    _write(tmp_path, text.replace('"demo-cpu-3"', '"v1-h100-1h"'))
    with pytest.raises(CampaignError, match="field 'budget_s'"):
        open_campaign(path)  # an official track's budget is frozen
    _write(tmp_path, text.replace('"demo-cpu-3"', '"no-such-track"'))
    with pytest.raises(CampaignError, match=r"field 'track'.*unknown track"):
        open_campaign(path)


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, 'track = "demo-cpu-3"\nagent = "scripted"\nmodels = []\n')
    for args in (["plan", str(path)], ["run", str(path), "--slots", "1"]):
        out = toolkit("campaign", *args)
        assert out.returncode == 2
        assert "field 'models'" in out.stderr and "Traceback" not in out.stderr
    missing = toolkit("campaign", "plan", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "no such campaign file" in missing.stderr
    good = write_campaign(tmp_path / "g", seeds=[0], budget=10)
    both = toolkit("campaign", "run", str(good), "--slots", "1", "--gpus", "0")
    assert both.returncode == 2 and "not both" in both.stderr
    for command in (["campaign"], ["campaign", "plan"], ["campaign", "run"]):
        text = toolkit(*command, "-h").stdout
        assert "Example" in text.splitlines()[-3] or "Example" in text


def test_a_track_that_pins_other_training_data_refuses_the_campaign(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, seeds=[0], budget=10)
    registry = tmp_path / "results" / "tracks.json"
    tracks = json.loads(registry.read_text())
    for track in tracks:
        if track["id"] == "demo-cpu-3":
            track["train_data_sha256"] = "0" * 64
    registry.write_text(json.dumps(tracks))
    out = toolkit("campaign", "run", str(path), "--slots", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not the training data of track 'demo-cpu-3'" in out.stderr
    assert not list((tmp_path / "results").glob("demo-cpu-3/*.json"))  # nothing was run


def test_every_problem_of_a_campaign_file_is_said(tmp_path: Path) -> None:
    """A file without [[models]] used to report only that and hide its other mistakes."""
    path = _write(tmp_path, 'track = "demo-cpu-3"\nagent = "scripted"\ncpus_per_run = 0\n')
    with pytest.raises(CampaignError) as info:
        load_campaign_file(path)
    message = str(info.value)
    assert "field 'models'" in message and "field 'cpus_per_run'" in message, message
    assert "\n" not in message
