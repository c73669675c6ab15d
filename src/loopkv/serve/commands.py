"""Subcommands: serve-bench (LLA Table 5's measurements), kernel-bench (Table 13's)."""
from __future__ import annotations

from loopkv.jobs import Arg, JobSpec
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import write_json

# measure speed and memory as a user would run them: MKL in its default mode (utils/numerics.py)
TIMING_COMMANDS = ("serve-bench", "kernel-bench")


SERVE_BENCH = JobSpec(
    "serve-bench", "bytes/token, capacity and decode speed of the served methods (Table 5)",
    # random-weight models of the configured architecture, sized by the tokenizer's vocabulary
    reads=("serve", "model.arch", "data.tokenizer.vocab_size", "methods.cache_dtype", "methods.k_share",
           "methods.budgets"),
    skip=("serve.kernel",),
    outputs=(Arg("out", "result JSON"),),
    threads="serve.threads", device=True, size="serve")

KERNEL_BENCH = JobSpec(
    "kernel-bench", "latent attention vs the teacher's and reconstruct-then-attend (Table 13)",
    reads=("serve.kernel", "methods.rope_share"),   # the absorbed read's rotated share, as lla_decoupled's
    skip=("serve.kernel.measured",),   # Table 13's input (results measured elsewhere), not this job's
    outputs=(Arg("out", "result JSON"),),
    threads="serve.threads", device=True, size="serve")   # the Triton kernel runs on cuda, the C++ one on the CPU


def register(sub) -> None:
    add_command(sub, SERVE_BENCH, _serve_bench)
    add_command(sub, KERNEL_BENCH, _kernel_bench)


def _serve_bench(job) -> None:
    from loopkv.serve.bench import run

    cfg = job.cfg
    arch = {**cfg["model"]["arch"], "vocab_size": cfg["data"]["tokenizer"]["vocab_size"]}
    result = run(cfg["serve"], arch, cfg["methods"], str(job.device))
    write_json(job.args.out, {**result, "threads": job.threads, "provenance": job.prov.block()})


def _kernel_bench(job) -> None:
    import torch

    from loopkv.serve.kernel_bench import kernel_rows

    device, k = job.device, job.cfg["serve"]["kernel"]
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    rows = kernel_rows(k["contexts"], k["heads"], k["head_dim"], k["r_k"], k["r_v"], rounds=k["rounds"],
                       dtype=dtype, device=device, rope_share=job.cfg["methods"]["rope_share"])
    write_json(job.args.out, {"rows": rows, "threads": job.threads, "provenance": job.prov.block()})
