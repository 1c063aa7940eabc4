"""How fast does the starter's model learn a look-up? A fast probe of the learnability frontier.

`bench_learner.py` answers the gate's question (train, export, grade with the real grader) and
takes minutes per row. This probe answers the question beneath it, in a loop with no export and
no grader: it trains the starter's own model on a synthetic look-up and, every `--every`
seconds, measures on held-out documents the loss on the answer bytes, the share of answer bytes
right (teacher-forced), the share of answers right in every byte (what greedy decoding would
write), and the accuracy at each byte of an answer (first, second, third, later). The first
byte is the look-up itself (find the key, copy what follows it); the later bytes only continue a
copy already begun, so a model that learns to copy but not to look up shows it there first.

Tasks:
- `wide`: the same with two-letter keys (`# KQabc ...`) and letters drawn freely, so that 50 or
  more pairs fit (the chance floor's 2% needs 50 same-shape candidates);
- `glued`: a register `# Kabc Mdef ...` of `--pairs` upper-case keys glued to `--vlen`
  lower-case letters used nowhere else in the document, then questions `? K` whose answer is
  the key's letters (the `glued6` probe of `learner_variants/`);
- `split`: the `glued` register with each value's letters dotted (`# Ka.b.c ...`), the answer
  the letters joined (`abc`): no span of the prompt is the answer, so a blind pick of the
  chance floor never finds it, whatever the number of pairs;
- `--heading` and `--ask` give the register layouts a family's wording (`--heading Lockers
  --ask "locker {}"`, the tier-1 register of `records`, exam_builder/families/register.py), and
  `--echo` writes each register entry as the question names its key (`locker Ka.b.c`), and
  `--key-sep .` writes a separator between a key and its value too (`K.a.b.c`);
- `dotted`: the other way round: the register glued, the answer dotted (`a.b.c`);
- `digits`: `Stores: K 341, b 517, ...` then `Bin K? ` (the `asked` probe: the question does
  not repeat the bytes before the value).

Training documents ask `--questions` questions each: `--distinct` keys (all by default) once
each, then (if more are asked) keys drawn again among them, so that a key is asked several
times and its earlier answer is in sight (the learner's re-asks); `--random-order` shuffles the
questions, so that a key's first ask may come after other keys' repeats. Held-out documents
ask every key exactly once (`--eval-questions`), the exam's situation: the answer is only in the
register. Threads: `--threads` (1 lets two probes share a 2-core box at full speed each).

The reference learner's curriculum and schedule: `--warm-pairs 3 --warm-share 0.3` trains the
first 30% of the time on registers of three pairs (the questions a document asks scaled with
its pairs), and `--hold 0.8` holds the learning rate until the last 20% of the time.

Run:
    .venv/bin/python benchmarks/lookup_probe.py --seconds 300 [--questions 24 --random-order]
        [--lr 1e-3 --batch 32 --layers 2 --heads 2 --width 128] [--task digits --pairs 10]
"""

from __future__ import annotations

import argparse
import math
import random
import string
import time
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from toolkit.learn.corpus import Example, weighted
from toolkit.learn.trainer import _batch, starter_module

Parts = list[tuple[str, bool]]
"""A document as (text, is the answer) pieces."""
Batch = tuple[torch.Tensor, ...]
TASKS = ("glued", "wide", "split", "dotted", "digits")
"""Inputs, targets and weights."""


@dataclass(frozen=True)
class Task:
    name: str
    pairs: int
    value_len: int
    heading: str = ""
    """A line above the register (a family's tier-1 wording), instead of its `# ` prefix."""
    ask: str = "? {}"
    """The question of the register layouts, `{}` the key."""
    echo: bool = False
    """Write each register entry as the question names it (`locker Ka.b.c locker Md.e.f`)."""
    key_sep: str = ""
    """Written between a key and its value in the register (`.`: `K.a.b.c`)."""

    def document(self, rng: random.Random, order: list[int]) -> Parts:
        """A register of `pairs` keys, then a question for each index of `order`."""
        parts: Parts = []
        if self.name in ("glued", "wide", "split", "dotted"):
            n = self.value_len
            if self.name != "wide":
                keys = rng.sample(string.ascii_uppercase, self.pairs)
                letters = rng.sample(string.ascii_lowercase, n * self.pairs)
            else:
                upper = string.ascii_uppercase
                keys = rng.sample([a + b for a in upper for b in upper], self.pairs)
                letters = [rng.choice(string.ascii_lowercase) for _ in range(n * self.pairs)]
            values = ["".join(letters[n * i : n * i + n]) for i in range(self.pairs)]
            written = [".".join(v) for v in values] if self.name == "split" else values
            named = [self.ask.format(k) for k in keys] if self.echo else keys
            register = " ".join(k + self.key_sep + v for k, v in zip(named, written, strict=True))
            if self.name == "dotted":
                values = [".".join(v) for v in values]
            parts.append(
                (f"{self.heading}\n{register}\n" if self.heading else f"# {register}\n", False)
            )
            ask = self.ask
        else:
            keys = rng.sample(string.ascii_letters, self.pairs)
            values = [
                "".join(rng.choice(string.digits) for _ in range(self.value_len))
                for _ in range(self.pairs)
            ]
            register = ", ".join(f"{k} {v}" for k, v in zip(keys, values, strict=True))
            parts.append((f"Stores: {register}\n", False))
            ask = "Bin {}? "
        for i in order:
            parts += [(ask.format(keys[i]), False), (values[i], True), ("\n", False)]
        return parts


def encode(parts: Parts, text_weight: float) -> Example:
    """`parts` as the reference learner's training example: answers weigh 1, the rest
    `text_weight`."""
    pieces = [weighted(text, 1.0 if is_answer else text_weight) for text, is_answer in parts]
    return Example(b"".join(p for p, _ in pieces), [w for _, ws in pieces for w in ws])


@dataclass
class Scores:
    loss: float
    byte: float
    exact: float
    by_position: list[float]

    def line(self) -> str:
        positions = " ".join(f"{p:.2f}" for p in self.by_position)
        return (
            f"answer loss {self.loss:.3f}  bytes {self.byte:.3f}  exact {self.exact:.3f}  "
            f"by byte {positions}"
        )


def evaluate(model: torch.nn.Module, held_out: list[Batch]) -> Scores:
    """Teacher-forced scores on the answer bytes of `held_out` (an answer is a run of them)."""
    model.eval()
    losses, hits, total, exact, answers = [], 0, 0, 0, 0
    at = [[0, 0] for _ in range(4)]  # right, seen: first, second, third, later bytes
    with torch.no_grad():
        for x, y, w in held_out:
            logits = model(x)
            right = logits.argmax(-1) == y
            answer = w == 1.0
            per_byte = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1), reduction="none")
            losses.append(per_byte[answer.reshape(-1)].mean().item())
            hits += int(right[answer].sum())
            total += int(answer.sum())
            for row_answer, row_right in zip(answer.tolist(), right.tolist(), strict=True):
                start = None
                for j, inside in enumerate([*row_answer, False]):
                    if inside and start is None:
                        start = j
                    elif not inside and start is not None:
                        span = row_right[start:j]
                        exact += all(span)
                        answers += 1
                        for k, ok in enumerate(span):
                            at[min(k, 3)][0] += ok
                            at[min(k, 3)][1] += 1
                        start = None
    model.train()
    return Scores(
        loss=sum(losses) / len(losses),
        byte=hits / max(1, total),
        exact=exact / max(1, answers),
        by_position=[r / s for r, s in at if s],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=20.0, help="seconds between evaluations")
    parser.add_argument("--task", choices=TASKS, default="glued")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--value-len", type=int, default=3)
    parser.add_argument("--questions", type=int, default=6, help="per training document")
    parser.add_argument("--random-order", action="store_true")
    parser.add_argument(
        "--distinct", type=int, default=0, help="keys a training document asks (0: all)"
    )
    parser.add_argument("--eval-questions", type=int, default=6)
    parser.add_argument("--text-weight", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument(
        "--hold", type=float, default=0.0, help="share of the time at full lr before the decay"
    )
    parser.add_argument("--warm-pairs", type=int, default=0, help="pairs of the first phase")
    parser.add_argument("--warm-share", type=float, default=0.0, help="share of the first phase")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heading", default="", help="a line above the register (not '# ')")
    parser.add_argument("--ask", default="? {}", help="the register layouts' question")
    parser.add_argument("--echo", action="store_true", help="register entries named as asked")
    parser.add_argument("--key-sep", default="", help="between a key and its value (`K.a.b.c`)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng, eval_rng = random.Random(args.seed), random.Random(12345)
    task = Task(
        args.task, args.pairs, args.value_len, args.heading, args.ask, args.echo, args.key_sep
    )

    small = replace(task, pairs=args.warm_pairs) if args.warm_pairs else task

    def order(
        r: random.Random, questions: int, random_order: bool, distinct: int, t: Task = task
    ) -> list[int]:
        keys = r.sample(range(t.pairs), min(distinct or t.pairs, t.pairs, questions))
        if random_order:  # every key once at some place, the other questions drawn among them
            asked = keys + [r.choice(keys) for _ in range(questions - len(keys))]
            r.shuffle(asked)
            return asked
        return keys + [r.choice(keys) for _ in range(questions - len(keys))]

    def batch(
        r: random.Random, n: int, questions: int, random_order: bool, distinct: int, t: Task = task
    ) -> Batch:
        docs = [t.document(r, order(r, questions, random_order, distinct, t)) for _ in range(n)]
        return _batch([encode(d, args.text_weight) for d in docs], 1024, r)

    train = starter_module("train")
    shape = train.ModelConfig(
        block_size=1024, n_layer=args.layers, n_head=args.heads, d_model=args.width
    )
    cfg = train.TrainConfig(model=shape, batch_size=args.batch, lr=args.lr)
    model = train.build_model(cfg, "cpu")
    optimizer = train.build_optimizer(model, cfg, "cpu")
    held_out = [batch(eval_rng, 64, args.eval_questions, False, 0) for _ in range(2)]
    print(vars(args), flush=True)
    start, steps, last = time.monotonic(), 0, 0.0
    while (elapsed := time.monotonic() - start) < args.seconds:
        progress = elapsed / args.seconds
        decay = min(1.0, (1.0 - progress) / (1.0 - args.hold))
        for group in optimizer.param_groups:  # the learner's: 5% warm-up, (hold,) linear decay
            group["lr"] = args.lr * min(1.0, progress / 0.05) * decay
        if progress < args.warm_share:  # the curriculum: a smaller register first
            asked = max(1, round(args.questions * small.pairs / task.pairs))
            x, y, w = batch(rng, args.batch, asked, args.random_order, args.distinct, small)
        else:
            x, y, w = batch(rng, args.batch, args.questions, args.random_order, args.distinct)
        per_byte = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1), reduction="none")
        loss = (per_byte * w.reshape(-1)).sum() / w.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        steps += 1
        if elapsed - last >= args.every:
            last = elapsed
            scores = evaluate(model, held_out)
            print(f"{elapsed:5.0f} s  step {steps:6d}  {scores.line()}", flush=True)
    scores = evaluate(model, held_out)
    chance = math.log(10 if task.name == "digits" else 26)
    print(f"end   step {steps:6d}  {scores.line()}  (chance loss {chance:.2f})", flush=True)


if __name__ == "__main__":
    main()
