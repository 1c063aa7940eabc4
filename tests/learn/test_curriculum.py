"""The reference learner's curriculum: the smallest register first, then the family's own, under
a rate held until the last part of the time (`corpus.smallest`, `trainer.learning_rate`)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from exam_builder.bank import Bank, BankFamily, load_bank
from exam_builder.families.register import MIN_PAIRS, Register
from toolkit.learn.corpus import Corpus, focused, smallest
from toolkit.learn.scale import CPU, Scale, Shape
from toolkit.learn.trainer import learning_rate, train_family

PLUGIN_BANK = Path(__file__).parent / "bank"


def _bank(tmp_path: Path, pairs: int = 7) -> Bank:
    (tmp_path / "bank.toml").write_text(
        f"""
        id = "curriculum"
        public = true
        seed = "the curriculum tests' bank"
        syllables = ["ka", "vo", "rel", "tam", "zu", "ish", "orn", "bex", "qua", "lim", "dro",
            "fen"]

        [[families]]
        family = "records"
        count = 12
        [families.params]
        questions = 6
        tiers = {{1 = 1}}
        [families.params.lookup]
        pairs = {pairs}
        separator = "~"
        [families.params.lookup.phrases]
        heading = "Bins"
        question = "bin {{key}}"
        """,
        encoding="utf-8",
    )
    return load_bank(tmp_path)


def _entry(bank: Bank, name: str = "records") -> BankFamily:
    return next(e for e in bank.families if e.family.name == name)


def _register_lines(corpus: Corpus, n: int) -> list[str]:
    return [ex.data.decode().split("\n")[1] for ex in corpus.take(n)]


def test_the_smallest_register_keeps_the_family_s_layout_with_the_fewest_entries(
    tmp_path: Path,
) -> None:
    bank = _bank(tmp_path)
    entry = _entry(bank)
    small = smallest(entry)
    assert small is not None and small.family is entry.family
    lookup = small.params.lookup  # type: ignore[attr-defined]
    full = entry.params.lookup  # type: ignore[attr-defined]
    assert isinstance(lookup, Register) and lookup.pairs == MIN_PAIRS
    assert lookup.model_dump(exclude={"pairs"}) == full.model_dump(exclude={"pairs"})
    assert full.pairs == 7  # the bank's entry is left as it was

    entry_re = re.compile(r"[A-Z][a-z](?:~[a-z])+")
    small_lines = _register_lines(Corpus(bank, small, reask=3.0), 20)
    full_lines = _register_lines(Corpus(bank, entry, reask=3.0), 20)
    assert all(len(entry_re.findall(line)) == MIN_PAIRS for line in small_lines), small_lines[0]
    assert all(len(entry_re.findall(line)) == 7 for line in full_lines), full_lines[0]
    small_bytes = sum(len(ex.data) for ex in Corpus(bank, small, reask=3.0).take(20))
    full_bytes = sum(len(ex.data) for ex in Corpus(bank, entry, reask=3.0).take(20))
    assert small_bytes < 0.6 * full_bytes  # fewer entries, fewer questions: cheaper steps


def test_no_smallest_register_where_there_is_nothing_smaller(tmp_path: Path) -> None:
    assert smallest(_entry(_bank(tmp_path, pairs=MIN_PAIRS))) is None
    plugin_bank = load_bank(PLUGIN_BANK)  # plug-in families of their own layout, no register
    assert all(smallest(e) is None for e in plugin_bank.families)


EIGHT = Path(__file__).resolve().parents[1] / "exam_builder" / "banks" / "eight"


def test_a_register_among_decoys_is_first_learned_alone_through_its_names() -> None:
    """The names look-up first, which register is asked later: with the decoys kept in the
    first steps the cpu scale learned 2 of 40, with them left out 37 of 40 (exams.md)."""
    bank = load_bank(EIGHT)
    for entry in bank.families:
        full = entry.params.lookup  # type: ignore[attr-defined]
        assert full.names and full.decoys == 4, entry.family.name
        small = smallest(entry)
        assert small is not None
        lookup = small.params.lookup  # type: ignore[attr-defined]
        assert lookup.pairs == MIN_PAIRS and lookup.decoys == 0 and not lookup.decoy_headings
        assert lookup.names == full.names and lookup.phrases == full.phrases
        assert lookup.separator == full.separator and lookup.keys == full.keys
        tier_one = replace(small, params=small.params.model_copy(update={"tiers": {1: 1.0}}))
        text = Corpus(bank, tier_one).document(0).text()
        assert not any(f"{h}\n" in text for h in full.decoy_headings), text
        assert f"{full.phrases.heading}\n" in text
        assert any(name in text for name in full.names), text
        assert full.decoys == 4  # the bank's entry is left as it was


def test_the_rate_warms_up_is_held_then_falls_to_zero() -> None:
    scale = Scale(
        name="cpu", device="cpu", shape=Shape(1, 1, 8), batch_size=1, lr=1.0, decay_share=0.2
    )
    assert learning_rate(scale, 0.0) == 0.0
    assert learning_rate(scale, 0.025) == pytest.approx(0.5)  # half-way through the warm-up
    for held in (0.05, 0.5, 0.79):
        assert learning_rate(scale, held) == pytest.approx(1.0)
    assert learning_rate(scale, 0.9) == pytest.approx(0.5)
    assert learning_rate(scale, 1.0) == 0.0
    whole = Scale(name="cpu", device="cpu", shape=Shape(1, 1, 8), batch_size=1, lr=1.0)
    for progress in (0.1, 0.4, 0.7, 0.99):  # a decay over the whole time, as the starter's
        assert learning_rate(whole, progress) == pytest.approx(1.0 - progress)
    assert CPU.decay_share < 1.0 and CPU.small_share > 0.0


def test_training_takes_the_smallest_register_first_then_the_family_s_own(
    tmp_path: Path,
) -> None:
    bank = _bank(tmp_path)
    entry = _entry(bank)
    small_entry = smallest(entry)
    assert small_entry is not None
    scale = Scale(
        name="cpu",
        device="cpu",
        shape=Shape(n_layer=1, n_head=1, d_model=16, block_size=256),
        batch_size=2,
        lr=1e-3,
        reask=1.0,
        small_share=0.5,
        decay_share=0.2,
    )
    corpus, small = Corpus(bank, entry, reask=1.0), Corpus(bank, small_entry, reask=1.0)
    seen: list[tuple[int, int]] = []

    def tick(elapsed: float, steps: int, loss: float) -> None:
        seen.append((small.documents, corpus.documents))

    trained = train_family(corpus, scale, tmp_path / "bundle", steps=8, small=small, tick=tick)
    assert trained.steps == 8 and not trained.cut
    assert (tmp_path / "bundle").is_dir()
    assert small.documents > 0 and corpus.documents > 0
    assert trained.documents == small.documents + corpus.documents
    first_full = next(i for i, (_, full) in enumerate(seen) if full > 0)
    assert first_full > 0 and seen[first_full - 1][1] == 0  # the small ones came first
    assert all(s == seen[first_full][0] for s, _ in seen[first_full:])  # and then no more


def test_the_cpu_scale_trains_only_the_tier_one_documents_of_a_mix() -> None:
    """On the demo bank (40% tier 1 in every family) the cpu scale's text is the register
    alone; a family whose mix has no tier 1, or that sets no mix, is trained as the bank makes
    it."""
    demo = load_bank(Path(__file__).resolve().parents[2] / "exam_builder/banks/public/demo")
    for entry in demo.families:
        assert 1 in entry.params.tiers and len(entry.params.tiers) == 2
        tier_one = focused(entry, CPU.train_tiers)
        assert tier_one.params.tiers == {1: entry.params.tiers[1]}, entry.family.name
        for doc in (Corpus(demo, tier_one).document(n) for n in range(6)):
            assert set(doc.tiers) == {1}, entry.family.name
        assert focused(entry, None) is entry
        own = entry.family.tiers[0]
        own_only = entry.params.model_copy(update={"tiers": {own: 1.0}})
        assert focused(replace(entry, params=own_only), (1,)).params.tiers == {own: 1.0}
    plugin_bank = load_bank(PLUGIN_BANK)
    assert all(focused(e, (1,)) is e for e in plugin_bank.families)  # no mix: as it is
