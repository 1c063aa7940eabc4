"""A campaign file's mistakes, said in one line with what was meant (issue 39): a misspelt
field gets a suggestion, and the registry the file names is the one used, never a results/
of the folder the campaign happens to run in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.campaign.conftest import REPO, write_campaign
from toolkit.campaign.config import CampaignError, load_campaign_file
from toolkit.campaign.setup import open_campaign


def test_a_misspelt_field_gets_a_suggestion(tmp_path: Path) -> None:
    path = write_campaign(tmp_path, seeds=[0], budget=10)
    path.write_text(path.read_text().replace("seeds =", "seed ="))
    with pytest.raises(CampaignError, match=r"field 'seed': .*did you mean 'seeds'\?"):
        load_campaign_file(path)
    path.write_text(path.read_text().replace("seed =", "seeds =").replace("name =", "nmae ="))
    with pytest.raises(CampaignError, match=r"field 'models\.0\.nmae': .*did you mean 'name'\?"):
        load_campaign_file(path)
    path.write_text(path.read_text().replace("nmae =", 'name = "scripted-baseline"\nzzz ='))
    with pytest.raises(CampaignError, match=r"field 'models\.0\.zzz': .*its fields: "):
        load_campaign_file(path)


def test_the_registry_the_file_names_is_the_one_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_campaign(tmp_path / "c", seeds=[0], budget=10)
    (tmp_path / "c" / "results" / "tracks.json").unlink()  # a new campaign: no results yet
    tracks = json.loads((REPO / "results" / "tracks.json").read_text())
    mine = [dict(t, id="my-demo") for t in tracks if t["id"] == "demo-cpu-3"]
    registry = tmp_path / "c" / "reg"
    registry.mkdir()
    (registry / "tracks.json").write_text(json.dumps(mine))
    path.write_text(path.read_text().replace('"demo-cpu-3"', '"my-demo"') + "")
    text = path.read_text().replace("[[models]]", 'registry = "reg"\n\n[[models]]', 1)
    path.write_text(text)
    elsewhere = tmp_path / "cwd"
    (elsewhere / "results").mkdir(parents=True)
    (elsewhere / "results" / "tracks.json").write_text(json.dumps(tracks))
    monkeypatch.chdir(elsewhere)  # a results/ of the folder the campaign runs in
    assert open_campaign(path).registry == registry
    path.write_text(text.replace('registry = "reg"', 'registry = "reg/tracks.json"'))
    assert open_campaign(path).registry == registry  # the file itself: its folder
    path.write_text(text.replace('registry = "reg"', 'registry = "nowhere"'))
    with pytest.raises(CampaignError, match=r"field 'registry': .*nowhere holds no tracks.json"):
        open_campaign(path)
    assert os.getcwd() == str(elsewhere)
