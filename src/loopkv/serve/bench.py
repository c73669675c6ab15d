"""The serving benchmark (LLA Table 5's measurements): bytes per token, capacity and decode speed
of the teacher, LLA (full-memory, latent-store, fused) and MELT, at the run's own scale and, for
bytes and capacity, at the paper's model sizes on the meta device.

Speed and footprint do not depend on the weights' values, so the models are random-weight models
of the configured architectures (as the paper's kernel benchmark is); quality is Table 1's business.
"""
from __future__ import annotations

import logging

import torch

from loopkv.cache import make_cache
from loopkv.cache.settings import cache_factory, configured_setting, new_codec
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.models.melt_model import melt_from_teacher
from loopkv.kernels import cpu_kernels
from loopkv.serve.capacity import capacity
from loopkv.serve.footprint import footprint, served_setting
from loopkv.serve.latency import Served, device_name, interleaved
from loopkv.utils.device import place

log = logging.getLogger(__name__)

LLA_PATHS = ("full", "latent", "fused")       # full-memory, latent-store (reconstruct on read), fused


def random_model(arch: dict, dtype: torch.dtype, device: str | torch.device, seed: int = 0) -> OuroForCausalLM:
    torch.manual_seed(seed)
    config = OuroConfig(**arch)
    # initialised in place (a 1.4B model on a GPU), except on the lazy device, which cannot
    with torch.device(device if torch.device(device).type != "lazy" else "cpu"):
        return place(OuroForCausalLM(config).to(dtype).eval(), device)


def weights_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def served_methods(teacher, methods_cfg: dict, budget: str, melt_gate: str = "full") -> list[Served]:
    """The teacher first (the reference of every ratio), LLA at `budget` on each read path, MELT."""
    config = teacher.config
    setting = configured_setting(methods_cfg, "lla", budget, config)
    param = next(teacher.parameters())
    codec = new_codec(setting, config).to(device=param.device, dtype=param.dtype)
    torch.nn.init.normal_(codec.up_k, std=0.05)   # untrained values cost the same; not all zeros
    melt = melt_from_teacher(teacher, melt_gate).eval()
    return [Served("teacher", teacher, lambda: make_cache("full", config)),
            *[Served(f"lla {budget} {path}", teacher, cache_factory(setting, config, codec, read_path=path))
              for path in LLA_PATHS],
            Served("melt", melt, lambda: make_cache("melt", melt.config))]


def cells(budgets: list[str]) -> list[tuple[str, str, str | None]]:
    """(method, budget, read path) rows of the footprint and capacity tables."""
    return [("full", "1x", None), *[("lla", b, "fused") for b in budgets], ("melt", "Tx", None)]


def scale_rows(label: str, config, budgets: list[str], methods_cfg: dict, cache_dtype: torch.dtype,
               compute_dtype: torch.dtype, device: str, context: int, budget_bytes: int | None,
               weights: int) -> list[dict]:
    """Footprint and capacity of each cell at one model scale."""
    rows = []
    for method, budget, path in cells(budgets):
        label_budget = f"{config.total_ut_steps}x" if method == "melt" else budget
        setting = served_setting(method, label_budget, methods_cfg, config)
        row = footprint(setting, config, cache_dtype, compute_dtype, device=device, read_path=path)
        cap = capacity(setting, config, context, budget_bytes, weights, compute_dtype, device, path)
        rows.append({"scale": label, **row, **{f"capacity_{k}": v for k, v in cap.items()}})
        log.info("%s %s %s: %d bytes/token, max batch %d at %d tokens", label, method, budget,
                 row["bytes_per_token"], cap["max_batch"], context)
    teacher = rows[0]
    for row in rows:
        row["compression"] = teacher["bytes_per_token"] / row["bytes_per_token"]
        row["capacity_ratio"] = (row["capacity_max_batch"] / teacher["capacity_max_batch"]
                                 if teacher["capacity_max_batch"] else None)
    return rows


def context_sweep(label: str, config, budgets: list[str], methods_cfg: dict, compute_dtype: torch.dtype,
                  device: str, contexts: list[int], budget_bytes: int | None, weights: int) -> list[dict]:
    """LLA Figure 10: each cell's capacity (largest batch that fits) at every context length."""
    rows = []
    for method, budget, path in cells(budgets):
        label_budget = f"{config.total_ut_steps}x" if method == "melt" else budget
        setting = served_setting(method, label_budget, methods_cfg, config)
        for context in contexts:
            cap = capacity(setting, config, context, budget_bytes, weights, compute_dtype, device, path)
            rows.append({"scale": label, "method": method, "budget": label_budget, "read_path": path,
                         "context": context, "max_batch": cap["max_batch"], "cache_bytes_at_max": cap["cache_bytes_at_max"],
                         "budget_bytes": budget_bytes, "weights_bytes": weights})
    return rows


def run(cfg: dict, arch: dict, methods_cfg: dict, device: str = "cpu") -> dict:
    """cfg: the `serve` config section. Returns {"footprint_capacity": rows, "latency": rows, "device"}."""
    cache_dtype = getattr(torch, methods_cfg["cache_dtype"])
    compute = torch.float32 if device == "cpu" else torch.bfloat16
    teacher = random_model(arch, compute, device)
    # CPU: the configured budget; GPU: the device's memory (search by allocation until out of
    # memory), or `gpu_memory_mb` when given (a formula-guessed start: two probes per method)
    budget_mb = cfg.get("gpu_memory_mb") if device.startswith("cuda") else cfg["memory_mb"]
    budget_bytes = None if budget_mb is None else budget_mb * 2**20
    rows = scale_rows("this run", teacher.config, cfg["budgets"], methods_cfg, cache_dtype, compute, device,
                      cfg["context"], budget_bytes, weights_bytes(teacher))
    sweep = context_sweep("this run", teacher.config, cfg["budgets"], methods_cfg, compute, device,
                          cfg["capacity_contexts"], budget_bytes, weights_bytes(teacher))
    paper = cfg["paper"]
    for name, paper_arch in paper["models"].items():
        config = OuroConfig(**paper_arch)
        with torch.device("meta"):
            weights = weights_bytes(OuroForCausalLM(config).to(torch.bfloat16))
        rows += scale_rows(name, config, cfg["budgets"], methods_cfg, torch.bfloat16, torch.bfloat16, "meta",
                           paper["context"], int(paper["memory_gb"] * 10**9), weights)
        if cfg["capacity_contexts"]:   # Figure 10 at the paper's sizes too (meta device: free)
            sweep += context_sweep(name, config, cfg["budgets"], methods_cfg, torch.bfloat16, "meta",
                                   paper["capacity_contexts"], int(paper["memory_gb"] * 10**9), weights)
    latency = interleaved(served_methods(teacher, methods_cfg, cfg["latency_budget"]), cfg["batch_sizes"],
                          cfg["prompt_len"], cfg["new_tokens"], cfg["rounds"], cfg["warmup"],
                          teacher.config.vocab_size, device)
    # which implementation the CPU fused rows ran: the C++ kernel or the tiled torch path (LOOPKV_CPU_KERNEL)
    kernel = cpu_kernels.implementation() if torch.device(device).type == "cpu" else None
    return {"footprint_capacity": rows, "capacity_by_context": sweep, "latency": latency,
            "device": device_name(torch.device(device)),
            "cpu_latent_kernel": kernel}
