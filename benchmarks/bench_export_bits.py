"""What does a trained starter bundle cost and lose at fewer bits per weight?

The 16 MB limit is on the gzipped bundle, and int8 weights pack to about 7.4 bits each, so the
limit holds about 16M parameters. `train.py --set export_bits=B` rounds the weight matrices to
B-bit integers (kept in int8, which gzip then packs tighter) so that a larger model fits. This
takes a trained bundle, exports its weights again at each B asked, packs each export the way the
grader does, and prints the packed size, the parameters the 16 MB limit would hold at that rate,
and the validation bits per byte of each export on the same windows as train.py's:

    python benchmarks/bench_export_bits.py --bundle bundles/b1 --data data [--bits 8,7,6,5,4]

Re-rounding an int8 bundle differs from rounding the float weights by at most half an int8 step,
a fraction of the coarser step being measured.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from starter_bundle import REPO, starter_module

sys.path.insert(0, str(REPO))
from toolkit.grading.pack import pack_bundle

LIMIT_BYTES = 16_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="a trained starter bundle")
    parser.add_argument("--data", type=Path, required=True, help="folder with val.bin")
    parser.add_argument("--bits", default="8,7,6,5,4", help="comma-separated bits per weight")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--eval-batches", type=int, default=8, help="validation batches")
    args = parser.parse_args()
    bits = [int(b) for b in args.bits.split(",")]
    if not all(2 <= b <= 8 for b in bits):
        sys.exit("error: --bits: each between 2 and 8")
    train, export = starter_module("train"), starter_module("export")
    model = export.import_bundle(args.bundle).load(str(args.bundle), args.device).gpt
    cfg = train.configure("default", [f"{k}={v}" for k, v in model.cfg.to_dict().items()])
    cfg.eval_batches = args.eval_batches
    windows = train.val_windows(train.load_split(args.data, "val"), cfg)
    params = model.num_params()
    print(f"bundle {args.bundle}: {params / 1e6:.2f}M parameters, {model.cfg.to_dict()}")
    print("bits  packed MB bits/param  params in 16 MB  val bpb")
    with tempfile.TemporaryDirectory(prefix="bench-bits-") as tmp:
        for b in bits:
            out = Path(tmp) / f"b{b}"
            export.write_bundle(model.cpu(), out, bits=b)
            packed = pack_bundle(out, Path(tmp) / f"b{b}.tar.gz").packed_bytes
            again = export.import_bundle(out).load(str(out), args.device).gpt
            with torch.no_grad():
                bpb = train.evaluate_bpb(again, windows, args.device)
            per_param = 8 * packed / params
            print(
                f"{b:>4} {packed / 1e6:>10.2f} {per_param:>10.2f} "
                f"{8 * LIMIT_BYTES / per_param / 1e6:>15.1f}M {bpb:>8.4f}",
                flush=True,
            )
            model.to(args.device)


if __name__ == "__main__":
    main()
