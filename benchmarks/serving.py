"""Serving benchmark (LLA Table 5's measurements), printed: per method its bytes per token, capacity
ratio to the teacher (vs its compression ratio) and decode throughput ratio to the teacher at equal
batch, all measured in this run. Targets (issue 7): capacity ratio >= 0.9 x compression; LLA
latent-store (fused) decode throughput >= 1.0 x the teacher's.

    python benchmarks/serving.py [--config config/config.yaml] [--device cpu|cuda] [--out serving.json]
        [--arch ouro-1.4b] [--batch-sizes 1 8 32] [--prompt-len N] [--new-tokens N] [--rounds N] [--context N]

--arch times a model of one of serve.paper.models' architectures (random weights) instead of the
configured one; the other options override the config's serve section for this run.
"""
from __future__ import annotations

import argparse
import json
import logging

from loopkv.config import load_config
from loopkv.serve.bench import bench_slice, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="also write the full result JSON here")
    parser.add_argument("--arch", help="a model of serve.paper.models (e.g. ouro-1.4b) instead of the configured one")
    for name in ("prompt-len", "new-tokens", "rounds", "context", "gpu-memory-mb"):
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--batch-sizes", type=int, nargs="+")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")   # progress on stderr
    cfg = bench_slice(load_config(args.config, check_paths=False))
    if args.arch:
        cfg["arch"] = cfg["serve"]["paper"]["models"][args.arch]
    for key in ("prompt_len", "new_tokens", "rounds", "context", "batch_sizes", "gpu_memory_mb"):
        if getattr(args, key) is not None:
            cfg["serve"][key] = getattr(args, key)
    result = run(cfg["serve"], cfg["arch"], cfg["methods"], args.device)
    print(f"device: {result['device']}")
    print(f"{'scale':10} {'method':6} {'budget/path':14} {'bytes/token':>12} {'compression':>11} "
          f"{'max batch':>9} {'capacity ratio':>14} {'>= 0.9x?':>8}")
    for r in result["footprint_capacity"]:
        ok = r["capacity_ratio"] is not None and r["capacity_ratio"] >= 0.9 * r["compression"]
        print(f"{r['scale']:10} {r['method']:6} {r['budget'] + ' ' + (r['read_path'] or ''):14} "
              f"{r['bytes_per_token']:>12} {r['compression']:>10.2f}x {r['capacity_max_batch']:>9} "
              f"{r['capacity_ratio']:>13.2f}x {'yes' if ok else 'NO':>8}")
    print(f"\n{'method':18} {'batch':>5} {'ms/step':>8} {'tokens/s':>9} {'throughput vs teacher':>22} "
          f"{'rounds lo-hi':>12} {'peak MiB':>9}")
    for r in result["latency"]:
        peak = f"{r['peak_bytes'] / 2**20:9.0f}" if r["peak_bytes"] is not None else f"{'-':>9}"
        low, high = r["throughput_ratio_range"]
        print(f"{r['method']:18} {r['batch']:>5} {r['decode_ms_per_token']:>8.2f} {r['tokens_per_s']:>9.1f} "
              f"{r['throughput_ratio_to_reference']:>21.2f}x {f'{low:.2f}-{high:.2f}':>12} {peak}")
    fused = [r for r in result["latency"] if r["method"].endswith("fused")]
    print("\nLLA fused (latent-store) throughput / teacher at equal batch (paired median, rounds' range): "
          + ", ".join(f"batch {r['batch']}: {r['throughput_ratio_to_reference']:.2f}x "
                      f"({r['throughput_ratio_range'][0]:.2f}-{r['throughput_ratio_range'][1]:.2f})" for r in fused)
          + " (target >= 1.0x)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
