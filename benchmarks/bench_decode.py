"""How fast does the starter's bundle decode, in-process (no sandbox, no protocol)?

Loads a freshly initialised starter bundle with its own `load()`, then times, on the demo
exam's prompts batched as the grader batches them: the first generation of every batch (new
shapes), the same again (shapes seen), and the prefill alone; and the cold start of a process
that imports torch. What phase 1 of a grading costs once the worker is up, without the rest.

    python benchmarks/bench_decode.py [--preset default] [--device cuda]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]

from starter_bundle import fresh_bundle, import_file  # noqa: E402  (this script's folder)

from exam_builder.build import build_exam  # noqa: E402
from exam_builder.exam_file import load_exam  # noqa: E402
from toolkit.grading.phases import asked_length  # noqa: E402


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="default")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    print(f"a fresh process importing torch: {time.perf_counter() - started:.2f}s")
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        work = Path(tmp)
        fresh_bundle(work / "bundle", args.preset)
        build_exam(REPO / "exam_builder/banks/public/demo", work / "exam", english_text=None)
        questions = load_exam(work / "exam" / "exam.jsonl")
        started = time.perf_counter()
        bundle = import_file(work / "bundle" / "inference.py", "bench_decode_inference")
        model = bundle.load(str(work / "bundle"), args.device)
        sync(args.device)
        print(f"load(): {time.perf_counter() - started:.2f}s")
    prompts = [q.prompt.encode()[-1024:] for q in questions]
    length = asked_length(questions)
    batches = [prompts[i : i + args.batch] for i in range(0, len(prompts), args.batch)]
    # The bundle's own model.py (registered by its inference.py) holds the attention context.
    inference_attention = sys.modules[type(model.gpt).__module__].inference_attention
    for label in ("first (new shapes)", "again (shapes seen)"):
        started = time.perf_counter()
        for batch in batches:
            model.generate(batch, [length] * len(batch))
        sync(args.device)
        total = time.perf_counter() - started
        print(
            f"generate, {label}: {total:.3f}s for {len(prompts)} prompts in {len(batches)} "
            f"batches x {length} bytes ({1000 * total / (len(batches) * length):.2f} ms per step)"
        )
    gpt = model.gpt
    graphed = [model.generate(b, [length] * len(b)) for b in batches]
    gpt.use_graphs = False
    started = time.perf_counter()
    eager = [model.generate(b, [length] * len(b)) for b in batches]
    sync(args.device)
    print(
        f"generate, eager steps (no graphs): {time.perf_counter() - started:.3f}s; the same "
        f"bytes as with graphs: {eager == graphed}"
    )
    gpt.use_graphs = None
    started = time.perf_counter()
    with torch.no_grad():
        for batch in batches:
            ids, positions, valid = gpt._pad_left([p or b"\n" for p in batch])
            with inference_attention(ids.device):
                gpt(ids, positions, gpt._prefill_mask(valid), last_only=True)
    sync(args.device)
    print(f"prefill only: {time.perf_counter() - started:.3f}s for {len(batches)} batches")


if __name__ == "__main__":
    main()
