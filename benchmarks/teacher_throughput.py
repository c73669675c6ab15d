"""Teacher pretraining throughput: tokens/s and wall time, measured in this run.

Times real optimisation steps (forward over all T loops, Ouro's objective, backward, AdamW) of the
configured architecture on random tokens, and projects the configured run's wall time. If the
workflow has already trained the teacher, also prints what that run measured.

`--compare` also measures, in the same run and from the same initial weights and batches, the
other ways to spend the cores (issue 25's "training that uses the CPU"): one job at 1 thread, two
1-thread jobs at once (two processes: what Snakemake does with two single-thread jobs on 2
cores; their summed tokens/s), and the step under `torch.compile` (its compile time apart). Each
line says whether its losses equal the eager run's bit for bit, so a faster variant that changes
the numbers shows as such.

    python benchmarks/teacher_throughput.py [--config config/config.yaml] [--steps 10] [--compare]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from pathlib import Path

import torch

from loopkv.config import load_config
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.train.objectives import ouro_loss

WARMUP = 2   # steps not timed (allocator warm-up; a compiled step compiles in its first)


def timed_steps(config: dict, threads: int, steps: int, compiled: bool = False) -> dict:
    """Median s/step over `steps` timed steps after the warm-up, the first step's time (a compile's
    cost) and every step's loss, from a fixed seed: equal settings give equal losses."""
    teacher, arch = config["teacher"], config["model"]["arch"]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    vocab = config["data"]["tokenizer"]["vocab_size"]
    model = OuroForCausalLM(OuroConfig(vocab_size=vocab, num_key_value_heads=arch["num_attention_heads"], **arch))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rows = torch.randint(3, vocab, (teacher["batch_size"], teacher["seq_len"] + 1))

    def loss_of(batch):
        out = model(batch[:, :-1], output_loop_logits=True, use_cache=False)
        return ouro_loss(out.loop_logits, out.exit_pdf, batch[:, 1:], teacher["entropy_beta"])["loss"]

    step_loss = torch.compile(loss_of) if compiled else loss_of
    times, losses = [], []
    for _ in range(steps + WARMUP):
        start = time.perf_counter()
        loss = step_loss(rows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    timed = times[WARMUP:]
    return {"step_s": statistics.median(timed), "min": min(timed), "max": max(timed), "first_s": times[0],
            "losses": losses, "n": len(timed), "params": sum(p.numel() for p in model.parameters())}


def _one_thread_job(args):
    config, steps = args
    return timed_steps(config, 1, steps)


def concurrent_single_thread(config: dict, steps: int, jobs: int = 2) -> list[dict]:
    """`jobs` 1-thread runs started together in separate processes (as Snakemake runs jobs)."""
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        return pool.map(_one_thread_job, [(config, steps)] * jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--steps", type=int, default=10, help=f"timed steps (after {WARMUP} warm-up steps)")
    parser.add_argument("--compare", action="store_true",
                        help="also 1 thread, two 1-thread jobs at once, and torch.compile")
    args = parser.parse_args()
    config = load_config(args.config, check_paths=False)
    teacher, arch = config["teacher"], config["model"]["arch"]
    tokens = teacher["batch_size"] * teacher["seq_len"]
    threads = teacher["threads"]

    base = timed_steps(config, threads, args.steps)
    print(f"model: {base['params'] / 1e6:.2f}M params, D={arch['num_hidden_layers']} T={arch['total_ut_steps']} "
          f"d={arch['hidden_size']} vocab={config['data']['tokenizer']['vocab_size']}; "
          f"batch {teacher['batch_size']} x seq {teacher['seq_len']}")
    print(f"measured, eager, {threads} threads: {base['step_s']:.3f} s/step (median of {base['n']}, "
          f"min {base['min']:.3f}, max {base['max']:.3f}), {tokens / base['step_s']:,.0f} tokens/s")
    print(f"projected: {teacher['steps']} steps = {teacher['steps'] * base['step_s'] / 60:.1f} min")

    if args.compare:
        def line(name, run, rate):
            same = "bitwise equal" if run["losses"] == base["losses"] else (
                "differ, max |d loss| "
                f"{max(abs(a - b) for a, b in zip(run['losses'], base['losses'])):.2e}")
            print(f"{name}: {rate:,.0f} tokens/s ({rate * base['step_s'] / tokens:.2f}x the eager "
                  f"{threads}-thread job), losses {same}")

        single = timed_steps(config, 1, args.steps)
        line("eager, 1 thread", single, tokens / single["step_s"])
        pair = concurrent_single_thread(config, args.steps)
        line("two 1-thread jobs at once (summed)", pair[0], sum(tokens / r["step_s"] for r in pair))
        compiled = timed_steps(config, threads, args.steps, compiled=True)
        line(f"torch.compile, {threads} threads", compiled, tokens / compiled["step_s"])
        print(f"  compile: first step {compiled['first_s']:.1f} s (eager's {base['first_s']:.2f} s)")

    curve_path = Path(config["results_dir"], "teacher/model/train_curve.json")
    if curve_path.exists():
        recorded = json.loads(curve_path.read_text())
        rates = [r["tokens_per_s"] for r in recorded["curve"]["train"]]
        wall = recorded["provenance"]["wall_time_s"]
        print(f"workflow run ({curve_path}): {len(rates)} steps in {wall / 60:.1f} min wall, "
              f"median {statistics.median(rates):,.0f} tokens/s")


if __name__ == "__main__":
    main()
