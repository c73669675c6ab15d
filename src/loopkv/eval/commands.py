"""Subcommands: teacher-eval, method-eval."""
from __future__ import annotations

from pathlib import Path

from loopkv.jobs import Arg, JobSpec, MethodKeys, View
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import write_json


_TEACHER = Arg("teacher", "teacher model directory")
_CORPUS = Arg("corpus", "corpus directory (test.txt)")
_TASKS = Arg("task", "NAME=DIR with test.jsonl", kind="named", required=False)
_METRICS = (Arg("out", "metrics JSON"), Arg("samples", "per-sample JSON (generations, correctness)", required=False))

TEACHER_EVAL = JobSpec(
    "teacher-eval", "quality of the teacher with its full cache",
    reads=("seed", "teacher_eval", "model.dtype"),
    inputs=(_TEACHER, _CORPUS, _TASKS), outputs=_METRICS,
    threads="teacher_eval.threads", device=True, size="eval")

METHOD_EVAL = JobSpec(
    "method-eval", "quality of a KV method at a budget, streaming through its own cache",
    # method_eval's settings (a MELT recipe batched at melt.eval_batch_size: views.method_eval)
    reads=("seed", View("method_eval", "loopkv.jobs.views:method_eval", depends=("method_eval", "melt.eval_batch_size")),
           "model.dtype", MethodKeys(served=True)),
    wildcards=(Arg("method", "a registered KV method (full = the teacher's cache)", kind="value"),
               Arg("budget", "a budget label of methods.budgets, or 1x for full", kind="value")),
    inputs=(_TEACHER, Arg("codec", "distilled codec (.pt) of a codec method", required=False),
            Arg("student", "a trained MELT model directory (method melt): evaluated against --teacher", required=False),
            _CORPUS, _TASKS),
    outputs=_METRICS,
    threads="method_eval.threads", device=True, size="eval")

EVICTION_EVAL = JobSpec(
    "eviction-eval", "quality of a KV method at a budget under token eviction (attention sinks + a recent window)",
    reads=(*METHOD_EVAL.reads, "eviction.sinks", "eviction.window"),
    wildcards=METHOD_EVAL.wildcards,
    inputs=(_TEACHER, Arg("codec", "distilled codec (.pt) of a codec method", required=False), _CORPUS, _TASKS),
    outputs=_METRICS,
    threads="method_eval.threads", device=True, size="eval")

MELT_MEMORY = JobSpec(
    "melt-memory", "cache bytes and process memory against generated tokens, and bytes against T",
    reads=("melt.memory_lengths", "melt.memory_batch", "melt.memory_loops", "melt.memory_methods", "model.dtype",
           MethodKeys(source="melt.memory_methods", served=False)),
    wildcards=(Arg("budget", "MELT's budget label in methods.budgets (ratio T)", kind="value"),),
    inputs=(_TEACHER, Arg("student", "the MELT model directory"),
            Arg("codec", "METHOD=codec.pt for each codec method compared", kind="named", required=False)),
    outputs=(Arg("out", "memory JSON"),),
    threads="melt.threads", device=True, size="eval")


def register(sub) -> None:
    add_command(sub, TEACHER_EVAL, _teacher_eval)
    add_command(sub, METHOD_EVAL, _method_eval)
    add_command(sub, EVICTION_EVAL, _eviction_eval)
    add_command(sub, MELT_MEMORY, _melt_memory)


def _melt_memory(job) -> None:
    import torch

    from loopkv.cache.registry import codec_methods
    from loopkv.errors import LoopKVError
    from loopkv.eval.memory import bytes_over_loops, measure
    from loopkv.utils.device import describe
    from loopkv.models.loading import load_teacher, teacher_config
    from loopkv.models.melt_model import load_melt

    args, device = job.args, job.device
    cfg, methods_cfg, dtype = job.cfg["melt"], job.cfg["methods"], job.cfg["model"]["dtype"]
    codecs = job.named("codec")
    missing = [m for m in cfg["memory_methods"] if m in codec_methods() and m not in codecs]
    if missing:
        raise LoopKVError(f"codec methods {missing} need --codec METHOD=codec.pt")
    # the curves are measured in child processes, each loading its own model: this process holds no
    # weights while they run (on a GPU they would share its memory)
    common = {"teacher": args.teacher, "student": args.student, "dtype": dtype, "methods_cfg": methods_cfg,
              "device": args.device,
              "lengths": cfg["memory_lengths"], "batch": cfg["memory_batch"], "prompt_len": 8,
              "prompt_token": teacher_config(args.teacher).bos_token_id, "threads": args.threads}
    jobs = [{**common, "method": "full", "budget": "1x"},
            *({**common, "method": m, "budget": args.budget, "codec": codecs.get(m)} for m in cfg["memory_methods"])]
    curves = measure(jobs)
    teacher = load_teacher(args.teacher, dtype, device)
    student = load_melt(args.student, dtype, device=device)
    loops = bytes_over_loops(teacher, student, [("full", "1x", methods_cfg)]
                             + [(m, args.budget, methods_cfg) for m in cfg["memory_methods"]],
                             cfg["memory_loops"], getattr(torch, methods_cfg["cache_dtype"]))
    write_json(args.out, {"curves": curves, "bytes_over_loops": loops, "compute_dtype": dtype,
                          "device": describe(device),
                          "batch": cfg["memory_batch"], "prompt_tokens": common["prompt_len"],
                          "cache_dtype": methods_cfg["cache_dtype"], "provenance": job.prov.block()})


def _teacher_eval(job) -> None:
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.eval.depth import quality_by_depth
    from loopkv.eval.quality import evaluate_quality
    from loopkv.models.loading import load_teacher
    from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws

    args, cfg = job.args, job.cfg["teacher_eval"]
    job.seed_everything("teacher-eval")
    model = load_teacher(args.teacher, job.cfg["model"]["dtype"], job.device)
    tokenizer = load_tokenizer(args.teacher)
    with fixed_draws(MEASUREMENT_SEED, job.device):   # the model's draws (Huginn's starts): every cell's the same
        metrics, samples = evaluate_quality(model, tokenizer, args.corpus, job.named("task"), cfg, cfg["seq_len"])
    metrics["model_type"], metrics["loop_depth"] = model.config.model_type, model.config.total_ut_steps
    if cfg["loop_depths"]:   # the same tasks at other test-time depths (Huginn's steps, Ouro's exit loop)
        metrics["by_loop_depth"], samples["by_loop_depth"] = quality_by_depth(
            model, tokenizer, args.corpus, job.named("task"), cfg, cfg["loop_depths"])
    metrics["kv_method"] = "full"
    metrics["cache_dtype"] = job.cfg["model"]["dtype"]
    if args.samples:
        write_json(args.samples, {"samples": samples, "provenance": job.prov.block()})
    write_json(args.out, {"metrics": metrics, "provenance": job.prov.block()})


def _eviction_eval(job) -> None:
    _method_eval(job, job.cfg["eviction"])


def _method_eval(job, eviction: dict | None = None) -> None:
    """A (method, budget) cell's quality; under `eviction` ({sinks, window}) its caches evict."""
    import torch

    from loopkv.cache import make_cache
    from loopkv.cache.settings import cache_factory
    from loopkv.eval.fidelity import teacher_fidelity
    from loopkv.eval.method_model import load_method_model
    from loopkv.eval.quality import evaluate_quality
    from loopkv.data.encoding import encode_text
    from loopkv.data.windows import heldout_windows
    from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws

    args, cfg, methods_cfg = job.args, job.cfg["method_eval"], job.cfg["methods"]
    student_dir = getattr(args, "student", None)   # eviction-eval serves no MELT student
    job.seed_everything("method-eval", args.method, args.budget)   # evicting or not: the same draws (paired)
    task_dirs = job.named("task")
    # MELT is a model variant: its own weights, read through its own cache, scored against the teacher
    served = load_method_model(args.teacher, args.method, args.budget, methods_cfg, job.cfg["model"]["dtype"],
                               codec_path=args.codec, student_dir=student_dir, device=job.device)
    model, student, tokenizer, setting = served.teacher, served.model, served.tokenizer, served.setting
    factory, cache_dtype = served.cache_factory, getattr(torch, methods_cfg["cache_dtype"])
    if eviction is not None:
        from loopkv.cache.eviction import evicting_factory

        factory = evicting_factory(factory, eviction["sinks"], eviction["window"])

    windows = heldout_windows(encode_text(tokenizer, Path(args.corpus, "test.txt").read_text()),
                              cfg["seq_len"], cfg["kl_windows"])[:, :cfg["seq_len"]]
    metrics = {"method": args.method, "budget": args.budget, "setting": setting,
               "read_path": served.read_path,
               "cache_dtype": methods_cfg["cache_dtype"], "compute_dtype": job.cfg["model"]["dtype"],
               # the budget: what the method stores on its capacity path (latent for lla / lla2d) ...
               "bytes_per_token": cache_factory(setting, model.config, served.codec, read_path="latent")()
               .bytes_per_token(cache_dtype),
               # ... and what the path evaluated here stores (full-memory lla: the teacher's bytes)
               "read_path_bytes_per_token": factory().bytes_per_token(cache_dtype),
               "teacher_bytes_per_token": make_cache("full", model.config).bytes_per_token(cache_dtype)}
    if eviction is not None:   # bytes per token above are per held token; a context holds held_slots of them
        metrics["eviction"] = {"sinks": eviction["sinks"], "window": eviction["window"],
                               "granule": factory().granule}
    if student_dir:
        metrics["melt"] = {k: getattr(student.config, k) for k in ("melt_gate", "melt_ema_decay",
                                                                    "melt_train_chunk_size")}
    metrics["fidelity"] = teacher_fidelity(model, windows, cfg["batch_size"], factory, student=student)
    with fixed_draws(MEASUREMENT_SEED, job.device):   # the teacher's draws: differences to it are paired
        quality, samples = evaluate_quality(student, tokenizer, args.corpus, task_dirs, cfg, cfg["seq_len"],
                                            cache_factory=factory, heldout=False)
    metrics.update(quality)
    if args.samples:
        write_json(args.samples, {"samples": samples, "provenance": job.prov.block()})
    write_json(args.out, {"metrics": metrics, "provenance": job.prov.block()})
