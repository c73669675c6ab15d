"""Subcommands: teacher-eval, method-eval."""
from __future__ import annotations

from pathlib import Path

from loopkv.cli_args import json_arg, named_path
from loopkv.utils.atomic import write_json
from loopkv.utils.provenance import Provenance


def register(sub) -> None:
    p = sub.add_parser("teacher-eval", help="quality of the teacher with its full cache")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"teacher_eval": ..., "model": ...} slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--corpus", required=True, help="corpus directory (test.txt)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with test.jsonl")
    p.add_argument("--out", required=True, help="metrics JSON")
    p.add_argument("--samples", help="per-sample JSON (generations, correctness)")
    p.set_defaults(func=_teacher_eval)

    p = sub.add_parser("method-eval", help="quality of a KV method at a budget, streaming through its own cache")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"method_eval", "methods", "model"} slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--method", required=True, help="a registered KV method (full = the teacher's cache)")
    p.add_argument("--budget", required=True, help="a budget label of methods.budgets, or 1x for full")
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--codec", help="distilled codec (.pt) for lla, lla2d, mla_head")
    p.add_argument("--corpus", required=True, help="corpus directory (test.txt)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with test.jsonl")
    p.add_argument("--out", required=True, help="metrics JSON")
    p.add_argument("--samples", help="per-sample JSON (generations, correctness)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (not part of the result)")
    p.set_defaults(func=_method_eval)


def _teacher_eval(args) -> None:
    import torch

    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.eval.quality import evaluate_quality
    from loopkv.models.loading import load_teacher
    from loopkv.utils.seeding import derive_seed, seed_everything

    cfg = args.cfg["teacher_eval"]
    torch.set_num_threads(cfg.get("threads", torch.get_num_threads()))
    seed_everything(derive_seed(args.seed, "teacher-eval"))
    task_dirs = dict(args.task)
    prov = Provenance(args.cfg, args.seed, {"teacher": args.teacher, "corpus": args.corpus,
                                            **{f"task:{k}": v for k, v in task_dirs.items()}})
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"])
    tokenizer = load_tokenizer(args.teacher)
    metrics, samples = evaluate_quality(model, tokenizer, args.corpus, task_dirs, cfg, cfg["seq_len"])
    metrics["kv_method"] = "full"
    metrics["cache_dtype"] = args.cfg["model"]["dtype"]
    if args.samples:
        write_json(args.samples, {"samples": samples, "provenance": prov.block()})
    write_json(args.out, {"metrics": metrics, "provenance": prov.block()})


def _method_eval(args) -> None:
    import torch

    from loopkv.cache import make_cache
    from loopkv.cache.settings import CODEC_METHODS, cache_factory, configured_setting, load_codec
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.errors import LoopKVError
    from loopkv.eval.fidelity import teacher_fidelity
    from loopkv.eval.quality import evaluate_quality
    from loopkv.models.loading import load_teacher
    from loopkv.train.mixture import encode_text, heldout_windows
    from loopkv.utils.seeding import derive_seed, seed_everything

    cfg, methods_cfg = args.cfg["method_eval"], args.cfg["methods"]
    torch.set_num_threads(args.threads)
    seed_everything(derive_seed(args.seed, "method-eval", args.method, args.budget))
    task_dirs = dict(args.task)
    inputs = {"teacher": args.teacher, "corpus": args.corpus, **{f"task:{k}": v for k, v in task_dirs.items()}}
    if args.codec:
        inputs["codec"] = args.codec
    prov = Provenance({**args.cfg, "method": args.method, "budget": args.budget}, args.seed, inputs)
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"])
    tokenizer = load_tokenizer(args.teacher)
    setting = configured_setting(methods_cfg, args.method, args.budget, model.config)
    codec = None
    if args.method in CODEC_METHODS:
        if not args.codec:
            raise LoopKVError(f"{args.method} needs --codec (a distilled codec from `loopkv distill`)")
        saved = torch.load(args.codec, map_location="cpu", weights_only=False)
        if saved["setting"]["kwargs"] != setting["kwargs"]:
            raise LoopKVError(f"codec {args.codec} was distilled for {saved['setting']}, not {setting}")
        codec = load_codec(setting, model.config, saved["codec_state"]).to(model.dtype)
    read_path = methods_cfg.get("read_path")   # only methods with read paths get one in their slice
    factory = cache_factory(setting, model.config, codec, read_path=read_path)
    cache_dtype = getattr(torch, methods_cfg["cache_dtype"])

    windows = heldout_windows(encode_text(tokenizer, Path(args.corpus, "test.txt").read_text()),
                              cfg["seq_len"], cfg["kl_windows"])[:, :cfg["seq_len"]]
    metrics = {"method": args.method, "budget": args.budget, "setting": setting,
               "read_path": read_path,
               "cache_dtype": methods_cfg["cache_dtype"], "compute_dtype": args.cfg["model"]["dtype"],
               # the budget: what the method stores on its capacity path (latent for lla / lla2d) ...
               "bytes_per_token": cache_factory(setting, model.config, codec, read_path="latent")()
               .bytes_per_token(cache_dtype),
               # ... and what the path evaluated here stores (full-memory lla: the teacher's bytes)
               "read_path_bytes_per_token": factory().bytes_per_token(cache_dtype),
               "teacher_bytes_per_token": make_cache("full", model.config).bytes_per_token(cache_dtype)}
    metrics["fidelity"] = teacher_fidelity(model, windows, cfg["batch_size"], factory)
    quality, samples = evaluate_quality(model, tokenizer, args.corpus, task_dirs, cfg, cfg["seq_len"],
                                        cache_factory=factory, heldout=False)
    metrics.update(quality)
    if args.samples:
        write_json(args.samples, {"samples": samples, "provenance": prov.block()})
    write_json(args.out, {"metrics": metrics, "provenance": prov.block()})
