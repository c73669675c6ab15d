"""Subcommands: serve-bench (LLA Table 5's measurements), kernel-bench (Table 13's)."""
from __future__ import annotations

from loopkv.cli_args import add_device_arg, json_arg
from loopkv.utils.atomic import write_json
from loopkv.utils.provenance import Provenance

# measure speed and memory as a user would run them: MKL in its default mode (utils/numerics.py)
TIMING_COMMANDS = ("serve-bench", "kernel-bench")


def register(sub) -> None:
    p = sub.add_parser("serve-bench", help="bytes/token, capacity and decode speed of the served methods (Table 5)")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"serve", "arch", "methods"} config slice')
    add_device_arg(p)
    p.add_argument("--out", required=True, help="result JSON")
    p.set_defaults(func=_serve_bench)

    p = sub.add_parser("kernel-bench", help="latent attention vs the teacher's and reconstruct-then-attend (Table 13)")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"kernel": serve.kernel, "threads"} config slice')
    add_device_arg(p)   # the Triton kernel runs on cuda, the C++ one on the CPU
    p.add_argument("--out", required=True, help="result JSON")
    p.set_defaults(func=_kernel_bench)


def _serve_bench(args) -> None:
    from loopkv.serve.bench import run
    from loopkv.utils.device import resolve_device

    device = resolve_device(args.device)
    prov = Provenance(args.cfg, 0, {})
    result = run(args.cfg["serve"], args.cfg["arch"], args.cfg["methods"], str(device))
    write_json(args.out, {**result, "provenance": prov.block()})


def _kernel_bench(args) -> None:
    import torch

    from loopkv.serve.kernel_bench import kernel_rows
    from loopkv.utils.device import resolve_device

    torch.set_num_threads(args.cfg["threads"])
    device = resolve_device(args.device)
    prov = Provenance(args.cfg, 0, {})
    k = args.cfg["kernel"]
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    rows = kernel_rows(k["contexts"], k["heads"], k["head_dim"], k["r_k"], k["r_v"], rounds=k["rounds"],
                       dtype=dtype, device=device)
    write_json(args.out, {"rows": rows, "provenance": prov.block()})
