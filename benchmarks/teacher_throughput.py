"""Teacher pretraining throughput: tokens/s and wall time, measured in this run.

Times real optimisation steps (forward over all T loops, Ouro's objective, backward, AdamW) of the
configured architecture on random tokens, and projects the configured run's wall time. If the
workflow has already trained the teacher, also prints what that run measured.

    python benchmarks/teacher_throughput.py [--config config/config.yaml] [--steps 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from loopkv.config import load_config
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.train.objectives import ouro_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (after 2 warm-up steps)")
    args = parser.parse_args()
    config = load_config(args.config, check_paths=False)
    teacher, arch = config["teacher"], config["model"]["arch"]
    torch.set_num_threads(teacher["threads"])
    torch.manual_seed(0)

    vocab = config["data"]["tokenizer"]["vocab_size"]
    model = OuroForCausalLM(OuroConfig(vocab_size=vocab, num_key_value_heads=arch["num_attention_heads"], **arch))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rows = torch.randint(3, vocab, (teacher["batch_size"], teacher["seq_len"] + 1))
    tokens = teacher["batch_size"] * teacher["seq_len"]

    times = []
    for i in range(args.steps + 2):
        start = time.perf_counter()
        out = model(rows[:, :-1], output_loop_logits=True, use_cache=False)
        loss = ouro_loss(out.loop_logits, out.exit_pdf, rows[:, 1:], teacher["entropy_beta"])["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i >= 2:
            times.append(time.perf_counter() - start)

    params = sum(p.numel() for p in model.parameters())
    step_s = statistics.median(times)
    print(f"model: {params / 1e6:.2f}M params, D={arch['num_hidden_layers']} T={arch['total_ut_steps']} "
          f"d={arch['hidden_size']} vocab={vocab}; batch {teacher['batch_size']} x seq {teacher['seq_len']}, "
          f"{teacher['threads']} threads")
    print(f"measured: {step_s:.3f} s/step (median of {len(times)}, min {min(times):.3f}, max {max(times):.3f}), "
          f"{tokens / step_s:,.0f} tokens/s")
    print(f"projected: {teacher['steps']} steps = {teacher['steps'] * step_s / 60:.1f} min")

    curve_path = Path(config["results_dir"], "teacher/model/train_curve.json")
    if curve_path.exists():
        recorded = json.loads(curve_path.read_text())
        rates = [r["tokens_per_s"] for r in recorded["curve"]["train"]]
        wall = recorded["provenance"]["wall_time_s"]
        print(f"workflow run ({curve_path}): {len(rates)} steps in {wall / 60:.1f} min wall, "
              f"median {statistics.median(rates):,.0f} tokens/s")


if __name__ == "__main__":
    main()
