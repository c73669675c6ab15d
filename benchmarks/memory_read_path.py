"""Peak memory of decoding with LLA's latent and fused read paths against the teacher's full cache,
through the memory figure's own probe (loopkv.eval.memory.measure: one spawned process per curve),
on a random model of the embedded default's architecture (config/config.yaml model.arch) at the
memory figure's lengths and batch. Random weights and an untrained (orthonormal) codec: the tokens
are meaningless, the shapes and bytes are those of the real run.

    python benchmarks/memory_read_path.py [--lengths 256 512 1024 2048] [--batch 4] [--out memory.json]

Prints, per curve, the cache at the cache dtype and the peak growth over the loaded process (on the
CPU: VmHWM minus VmRSS after loading; on a GPU: the allocator's peak) at each length.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from loopkv.cache.settings import configured_setting, new_codec
from loopkv.eval.memory import measure
from loopkv.models import OuroConfig, OuroForCausalLM

ARCH = dict(hidden_size=128, num_hidden_layers=4, total_ut_steps=4, num_attention_heads=4, head_dim=32,
            intermediate_size=512, rope_theta=10000.0, max_position_embeddings=4096, vocab_size=1024)
METHODS = {"cache_dtype": "float32", "k_share": 0.375, "budgets": {"4x": 4.0}}
MIB = 2 ** 20


def orthonormal_codec(setting, config):
    codec = new_codec(setting, config)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for kind in ("k", "v"):
            mu, down, up = codec.params(kind)
            basis = torch.linalg.qr(torch.randn(down.shape, generator=g, dtype=torch.float64)).Q.float()
            down.copy_(basis), up.copy_(basis)
            mu.zero_()
    return codec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--read-paths", nargs="+", default=["latent", "fused"],
                        help="LLA read paths to measure (a probe that ignores the job's read_path uses its own)")
    parser.add_argument("--out", help="write the curves here (JSON)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        model = OuroForCausalLM(OuroConfig(**ARCH, initializer_range=0.02)).eval()
        model.save_pretrained(Path(tmp, "teacher"))
        setting = configured_setting(METHODS, "lla", "4x", model.config)
        torch.save({"setting": setting, "codec_state": orthonormal_codec(setting, model.config).state_dict()},
                   Path(tmp, "lla.pt"))
        common = {"teacher": str(Path(tmp, "teacher")), "student": None, "dtype": "float32",
                  "methods_cfg": METHODS, "lengths": args.lengths, "batch": args.batch, "prompt_len": 8,
                  "prompt_token": 5, "threads": args.threads, "device": args.device}
        jobs = [{**common, "method": "full", "budget": "1x"}]
        jobs += [{**common, "method": "lla", "budget": "4x", "codec": str(Path(tmp, "lla.pt")), "read_path": p}
                 for p in args.read_paths]
        curves = measure(jobs)
    for job, c in zip(jobs, curves):
        base = c["process_after_load"]["memory_bytes"]
        asked = job.get("read_path")
        print(f"{c['method']} {c['budget']} read path {c.get('read_path')} (asked {asked}); {c['memory_measure']}")
        for p in c["points"]:
            print(f"  {p['generated']:6d} tokens  cache {p['cache_bytes_at_cache_dtype'] / MIB:7.2f} MiB"
                  f"  peak growth {(p['peak_memory_bytes'] - base) / MIB:7.1f} MiB  {p['seconds']:6.1f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"jobs": [{k: v for k, v in j.items() if k != "methods_cfg"}
                                                       for j in jobs], "curves": curves}, indent=1))


if __name__ == "__main__":
    main()
