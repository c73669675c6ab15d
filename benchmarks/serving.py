"""Serving benchmark (LLA Table 5's measurements), printed: per method its bytes per token, capacity
ratio to the teacher (vs its compression ratio) and decode throughput ratio to the teacher at equal
batch, all measured in this run. Targets (issue 7): capacity ratio >= 0.9 x compression; LLA
latent-store (fused) decode throughput >= 1.0 x the teacher's.

    python benchmarks/serving.py [--config config/config.yaml] [--device cpu|cuda] [--out serving.json]
"""
from __future__ import annotations

import argparse
import json

from loopkv.config import load_config
from loopkv.serve.bench import bench_slice, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="also write the full result JSON here")
    args = parser.parse_args()
    cfg = bench_slice(load_config(args.config, check_paths=False))
    result = run(cfg["serve"], cfg["arch"], cfg["methods"], args.device)
    print(f"device: {result['device']}")
    print(f"{'scale':10} {'method':6} {'budget/path':14} {'bytes/token':>12} {'compression':>11} "
          f"{'max batch':>9} {'capacity ratio':>14} {'>= 0.9x?':>8}")
    for r in result["footprint_capacity"]:
        ok = r["capacity_ratio"] is not None and r["capacity_ratio"] >= 0.9 * r["compression"]
        print(f"{r['scale']:10} {r['method']:6} {r['budget'] + ' ' + (r['read_path'] or ''):14} "
              f"{r['bytes_per_token']:>12} {r['compression']:>10.2f}x {r['capacity_max_batch']:>9} "
              f"{r['capacity_ratio']:>13.2f}x {'yes' if ok else 'NO':>8}")
    print(f"\n{'method':18} {'batch':>5} {'ms/step':>8} {'tokens/s':>9} {'throughput vs teacher':>22}")
    for r in result["latency"]:
        print(f"{r['method']:18} {r['batch']:>5} {r['decode_ms_per_token']:>8.2f} {r['tokens_per_s']:>9.1f} "
              f"{r['throughput_ratio_to_reference']:>21.2f}x")
    fused = [r for r in result["latency"] if r["method"].endswith("fused")]
    print("\nLLA fused (latent-store) throughput / teacher at equal batch: "
          + ", ".join(f"batch {r['batch']}: {r['throughput_ratio_to_reference']:.2f}x" for r in fused)
          + " (target >= 1.0x)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
