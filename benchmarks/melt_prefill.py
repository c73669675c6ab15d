"""Is a chunk-wise prompt prefill exact for served MELT? Measured in this run on a trained MELT model.

Served MELT is sequential (chunk size 1): every token, prompt tokens included, reads its
predecessors' final rows. A chunk-wise forward at the trained chunk size lets a token read its
chunk-mates' rows at the current loop instead, which is faster but is another function. This prints,
over held-out test-split windows, the per-token KL from the served logits to the chunk-wise ones (at
the trained chunk size and as one chunk), their top-1 agreement, and the time of each (on the CPU
with 1 thread, or on --device: cuda at paper scale).

    python benchmarks/melt_prefill.py [--results results] [--recipe full] [--windows 32] [--device auto]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from loopkv.data.encoding import encode_text
from loopkv.data.tokenizer import load_tokenizer
from loopkv.data.windows import heldout_windows
from loopkv.models import OuroConfig
from loopkv.models.melt_model import load_melt
from loopkv.utils.device import resolve_device, synchronize

BATCH = 16


def logits_at(model_dir: Path, chunk: int | None, windows: torch.Tensor) -> tuple[torch.Tensor, float]:
    model = load_melt(model_dir, train_chunk_size=chunk, device=windows.device).eval()
    synchronize(windows.device)
    start = time.perf_counter()
    with torch.no_grad():
        logits = torch.cat([model(windows[i:i + BATCH], use_cache=False).logits.float()
                            for i in range(0, len(windows), BATCH)])
    synchronize(windows.device)
    return logits.log_softmax(-1), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results")
    parser.add_argument("--recipe", default="full")
    parser.add_argument("--windows", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--device", default="auto", help="a launch.device value (auto: CUDA when there is one)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = resolve_device(args.device)
    root = Path(args.results)
    model_dir = root / "melt" / args.recipe / "stage2" / "model"
    tokenizer = load_tokenizer(root / "data" / "tokenizer")
    ids = encode_text(tokenizer, (root / "data" / "corpus" / "test.txt").read_text())
    windows = heldout_windows(ids, args.seq_len, args.windows)[:, :-1].to(device)
    trained = OuroConfig.from_pretrained(model_dir).melt_train_chunk_size   # the config only, no weights

    served, served_s = logits_at(model_dir, 1, windows)
    print(f"{model_dir}: trained at chunk size {trained}; {args.windows} windows of {args.seq_len} tokens")
    print(f"served (chunk 1, sequential): {served_s:.2f} s")
    for chunk in dict.fromkeys([trained, None]):
        other, seconds = logits_at(model_dir, chunk, windows)
        kl = (served.exp() * (served - other)).sum(-1)
        agree = (served.argmax(-1) == other.argmax(-1)).float().mean()
        name = "one chunk" if chunk is None else f"chunk {chunk}"
        print(f"{name}: {seconds:.2f} s ({served_s / seconds:.1f}x faster), KL(served || it) per token "
              f"{kl.mean():.4f} (max {kl.max():.3f}), top-1 agreement {agree:.4f}")


if __name__ == "__main__":
    main()
