"""Subcommands: teacher-eval, method-eval."""
from __future__ import annotations

from pathlib import Path

from loopkv.cli_args import add_device_arg, json_arg, named_path
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
    add_device_arg(p)
    p.set_defaults(func=_teacher_eval)

    p = sub.add_parser("method-eval", help="quality of a KV method at a budget, streaming through its own cache")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"method_eval", "methods", "model"} slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--method", required=True, help="a registered KV method (full = the teacher's cache)")
    p.add_argument("--budget", required=True, help="a budget label of methods.budgets, or 1x for full")
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--codec", help="distilled codec (.pt) for lla, lla2d, mla_head")
    p.add_argument("--student", help="a trained MELT model directory (method melt): evaluated against --teacher")
    p.add_argument("--corpus", required=True, help="corpus directory (test.txt)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with test.jsonl")
    p.add_argument("--out", required=True, help="metrics JSON")
    p.add_argument("--samples", help="per-sample JSON (generations, correctness)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (not part of the result)")
    add_device_arg(p)
    p.set_defaults(func=_method_eval)


    p = sub.add_parser("melt-memory", help="cache bytes and process memory against generated tokens, and bytes against T")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"melt": memory keys, "methods", "model"} slice')
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--student", required=True, help="the MELT model directory")
    p.add_argument("--budget", required=True, help="MELT's budget label in methods.budgets (ratio T)")
    p.add_argument("--codec", action="append", type=named_path, default=[],
                   help="METHOD=codec.pt for each codec method compared")
    p.add_argument("--out", required=True, help="memory JSON")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (not part of the result)")
    add_device_arg(p)
    p.set_defaults(func=_melt_memory)


def _melt_memory(args) -> None:
    import torch

    from loopkv.cache.settings import CODEC_METHODS
    from loopkv.errors import LoopKVError
    from loopkv.eval.memory import bytes_over_loops, measure
    from loopkv.utils.device import describe
    from loopkv.models.loading import load_teacher
    from loopkv.models.melt_model import load_melt
    from loopkv.utils.device import resolve_device

    device = resolve_device(args.device)
    cfg, methods_cfg, dtype = args.cfg["melt"], args.cfg["methods"], args.cfg["model"]["dtype"]
    torch.set_num_threads(args.threads)
    codecs = dict(args.codec)
    prov = Provenance(args.cfg, 0, {"teacher": args.teacher, "student": args.student,
                                     **{f"codec:{k}": v for k, v in codecs.items()}})
    missing = [m for m in cfg["memory_methods"] if m in CODEC_METHODS and m not in codecs]
    if missing:
        raise LoopKVError(f"codec methods {missing} need --codec METHOD=codec.pt")
    teacher = load_teacher(args.teacher, dtype, device)
    common = {"teacher": args.teacher, "student": args.student, "dtype": dtype, "methods_cfg": methods_cfg,
              "device": args.device,
              "lengths": cfg["memory_lengths"], "batch": cfg["memory_batch"], "prompt_len": 8,
              "prompt_token": teacher.config.bos_token_id, "threads": args.threads}
    jobs = [{**common, "method": "full", "budget": "1x"},
            *({**common, "method": m, "budget": args.budget, "codec": codecs.get(m)} for m in cfg["memory_methods"])]
    curves = measure(jobs)
    student = load_melt(args.student, dtype, device=device)
    loops = bytes_over_loops(teacher, student, [("full", "1x", methods_cfg)]
                             + [(m, args.budget, methods_cfg) for m in cfg["memory_methods"]],
                             cfg["memory_loops"], getattr(torch, methods_cfg["cache_dtype"]))
    write_json(args.out, {"curves": curves, "bytes_over_loops": loops, "compute_dtype": dtype,
                          "device": describe(device),
                          "batch": cfg["memory_batch"], "prompt_tokens": common["prompt_len"],
                          "cache_dtype": methods_cfg["cache_dtype"], "provenance": prov.block()})


def _teacher_eval(args) -> None:
    import torch

    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.eval.quality import evaluate_quality
    from loopkv.models.loading import load_teacher
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed, seed_everything

    cfg = args.cfg["teacher_eval"]
    torch.set_num_threads(cfg.get("threads", torch.get_num_threads()))
    seed_everything(derive_seed(args.seed, "teacher-eval"))
    task_dirs = dict(args.task)
    prov = Provenance(args.cfg, args.seed, {"teacher": args.teacher, "corpus": args.corpus,
                                            **{f"task:{k}": v for k, v in task_dirs.items()}})
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"], resolve_device(args.device))
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
    from loopkv.cache.settings import cache_factory
    from loopkv.eval.fidelity import teacher_fidelity
    from loopkv.eval.method_model import load_method_model
    from loopkv.eval.quality import evaluate_quality
    from loopkv.train.mixture import encode_text, heldout_windows
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed, seed_everything

    cfg, methods_cfg = args.cfg["method_eval"], args.cfg["methods"]
    torch.set_num_threads(args.threads)
    seed_everything(derive_seed(args.seed, "method-eval", args.method, args.budget))
    task_dirs = dict(args.task)
    inputs = {"teacher": args.teacher, "corpus": args.corpus, **{f"task:{k}": v for k, v in task_dirs.items()}}
    for name in ("codec", "student"):
        if getattr(args, name):
            inputs[name] = getattr(args, name)
    prov = Provenance({**args.cfg, "method": args.method, "budget": args.budget}, args.seed, inputs)
    # MELT is a model variant: its own weights, read through its own cache, scored against the teacher
    served = load_method_model(args.teacher, args.method, args.budget, methods_cfg, args.cfg["model"]["dtype"],
                               codec_path=args.codec, student_dir=args.student,
                               device=resolve_device(args.device))
    model, student, tokenizer, setting = served.teacher, served.model, served.tokenizer, served.setting
    factory, cache_dtype = served.cache_factory, getattr(torch, methods_cfg["cache_dtype"])

    windows = heldout_windows(encode_text(tokenizer, Path(args.corpus, "test.txt").read_text()),
                              cfg["seq_len"], cfg["kl_windows"])[:, :cfg["seq_len"]]
    metrics = {"method": args.method, "budget": args.budget, "setting": setting,
               "read_path": served.read_path,
               "cache_dtype": methods_cfg["cache_dtype"], "compute_dtype": args.cfg["model"]["dtype"],
               # the budget: what the method stores on its capacity path (latent for lla / lla2d) ...
               "bytes_per_token": cache_factory(setting, model.config, served.codec, read_path="latent")()
               .bytes_per_token(cache_dtype),
               # ... and what the path evaluated here stores (full-memory lla: the teacher's bytes)
               "read_path_bytes_per_token": factory().bytes_per_token(cache_dtype),
               "teacher_bytes_per_token": make_cache("full", model.config).bytes_per_token(cache_dtype)}
    if args.student:
        metrics["melt"] = {k: getattr(student.config, k) for k in ("melt_gate", "melt_ema_decay",
                                                                    "melt_train_chunk_size")}
    metrics["fidelity"] = teacher_fidelity(model, windows, cfg["batch_size"], factory, student=student)
    quality, samples = evaluate_quality(student, tokenizer, args.corpus, task_dirs, cfg, cfg["seq_len"],
                                        cache_factory=factory, heldout=False)
    metrics.update(quality)
    if args.samples:
        write_json(args.samples, {"samples": samples, "provenance": prov.block()})
    write_json(args.out, {"metrics": metrics, "provenance": prov.block()})
