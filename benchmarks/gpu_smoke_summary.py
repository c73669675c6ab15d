"""What a smoke run of the paper path measured (benchmarks/gpu_smoke.sh), from its results and logs:
per result file the stage, device, wall time and peak GPU memory (provenance); the training curves'
median step seconds; Table 5's rows (bytes per token, capacity, decode throughput ratios, peak
memory) and Table 13's; every job's Snakemake benchmark file (wall seconds, peak host RSS, CPU
seconds), from which launch.jobs' memory and runtime bases at this scale are set. Prints the JSON
and writes it to --out."""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def _stages(results: Path) -> list[dict]:
    rows = []
    for path in sorted(results.rglob("*.json")):
        if "checkpoints" in path.parts or "request_cache" in path.parts:
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            rows.append({"file": str(path.relative_to(results)), "error": f"{type(e).__name__}: {e}"})
            continue
        prov = data.get("provenance") if isinstance(data, dict) else None
        if not isinstance(prov, dict) or "wall_time_s" not in prov:
            continue
        row = {"file": str(path.relative_to(results)), "device": prov.get("device"),
               "wall_time_s": prov.get("wall_time_s"), "peak_gpu_bytes": prov.get("device_peak_bytes")}
        curve = data.get("curve")
        train = curve.get("train") if isinstance(curve, dict) else None
        if train:
            seconds = [r["seconds"] for r in train if "seconds" in r]
            rates = [r["tokens_per_s"] for r in train if "tokens_per_s" in r]
            row.update({"steps": len(train), "median_step_s": statistics.median(seconds) if seconds else None,
                        "median_tokens_per_s": statistics.median(rates) if rates else None})
        rows.append(row)
    return rows


def _job_benchmarks(logs: Path) -> dict:
    """Snakemake `benchmark:` files (one TSV row per job): the host side of each job."""
    jobs = {}
    for path in sorted((logs / "benchmarks").rglob("*.tsv")):
        lines = path.read_text().splitlines()
        if len(lines) < 2:
            continue
        row = dict(zip(lines[0].split("\t"), lines[1].split("\t")))
        jobs[str(path.relative_to(logs / "benchmarks"))] = {
            "wall_s": float(row["s"]), "max_rss_mb": float(row["max_rss"]) if row.get("max_rss") not in (None, "NA") else None,
            "cpu_time_s": float(row["cpu_time"]) if row.get("cpu_time") not in (None, "NA") else None}
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the run's results directory")
    parser.add_argument("logs", type=Path, help="the run's logs directory")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    summary = {"stages": _stages(args.results), "jobs": _job_benchmarks(args.logs),
               "failed_logs": sorted(str(p) for p in args.logs.rglob("*.log") if "Traceback" in p.read_text(errors="replace"))}
    serving = args.results / "serve/serving.json"
    if serving.exists():
        s = json.loads(serving.read_text())
        summary["table5"] = {"device": s["device"], "footprint_capacity": s["footprint_capacity"],
                             "latency": s["latency"]}
    kernel = args.results / "serve/kernel.json"
    if kernel.exists():
        summary["table13"] = json.loads(kernel.read_text())["rows"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k in ("stages", "failed_logs")}, indent=1))


if __name__ == "__main__":
    main()
