"""Subcommands: teacher-pretrain, distill, distill-on-policy, melt-train."""
from __future__ import annotations

from pathlib import Path

from loopkv.jobs import Arg, JobSpec, MethodKeys, View
from loopkv.jobs.runner import add_command
from loopkv.train.launch import world_size
from loopkv.utils.atomic import atomic_path, write_json


_TEACHER = Arg("teacher", "teacher model directory")
_CORPUS = Arg("corpus", "corpus directory (train.txt, val.txt)")
_TASKS = Arg("task", "NAME=DIR with train.jsonl", kind="named", required=False)
_METHOD = Arg("method", "a codec method (lla, lla2d, mla_head, lla_decoupled)", kind="value")
_BUDGET = Arg("budget", "a budget label of methods.budgets, e.g. 4x", kind="value")
_CODEC_OUT = (Arg("out", "distilled codec (.pt)"), Arg("curve", "training curve JSON"))

TEACHER_PRETRAIN = JobSpec(
    "teacher-pretrain", "pretrain the tiny looped teacher (resumable)",
    reads=("seed", "teacher", View("model.arch", "loopkv.jobs.views:teacher_arch",
                                   depends=("model.family", "model.arch", "model.huginn")), "model.dtype"),
    inputs=(_CORPUS, Arg("tokenizer", "tokenizer directory"), _TASKS),
    outputs=(Arg("out", "model directory to write (save_pretrained)"),),
    threads="teacher.threads", device=True, size="train", progress=True, checkpoints=True)

DISTILL = JobSpec(
    "distill", "distil a KV method's codec from the frozen teacher (DeepSpeed, resumable)",
    reads=("seed", "distill", "model.dtype", MethodKeys(served=False)),
    wildcards=(_METHOD, _BUDGET),
    inputs=(_TEACHER, Arg("calibration", "calibration state (.pt) for the SVD init"), _CORPUS, _TASKS),
    outputs=_CODEC_OUT,
    threads="distill.threads", ranks=True, device=True, size="train", progress=True, checkpoints=True)

DISTILL_ABLATION = JobSpec(
    "distill-ablation", "distil one variant's codec on the short schedule: LLA Table 10's (lla: one thing of the "
                        "recipe changed) or Table 14's (lla_decoupled: decoupled RoPE)",
    # MethodKeys first: the variant's K share (a View at methods.k_share) replaces the shared one
    reads=("seed", "model.dtype", MethodKeys(served=False),
           View("distill", "loopkv.jobs.views:distill_ablation", depends=("distill", "distill_ablations", "decoupled_rope")),
           View("methods.k_share", "loopkv.jobs.views:distill_ablation_k_share",
                depends=("methods.k_share", "distill_ablations", "decoupled_rope")),
           View("methods.rope_share", "loopkv.jobs.views:distill_ablation_rope_share",
                depends=("methods.rope_share", "decoupled_rope")),
           View("methods.query_adapter", "loopkv.jobs.views:distill_ablation_query_adapter",
                depends=("methods.query_adapter", "decoupled_rope"))),
    wildcards=(_METHOD, _BUDGET, Arg("variant", "a variant name: of distill_ablations.variants (lla), of "
                                                "decoupled_rope.variants (lla_decoupled)", kind="value")),
    inputs=(_TEACHER, Arg("calibration", "calibration state (.pt) for the init"), _CORPUS, _TASKS),
    outputs=_CODEC_OUT,
    threads="distill.threads", ranks=True, device=True, size="train", progress=True, checkpoints=True)

DISTILL_ON_POLICY = JobSpec(
    "distill-on-policy",
    "continue a distilled codec on the student's own generations (LLA Eq. 6-7; DeepSpeed, resumable)",
    # the report's bin width, the budget list, the method and the prompt tasks choose what is drawn and
    # run (the job gets its method and prompts as flags), not what one job computes
    reads=("seed", "on_policy", "model.dtype", MethodKeys(served=False)),
    skip=("on_policy.exposure_bin_tokens", "on_policy.budgets", "on_policy.method", "on_policy.prompts",
          "on_policy.benchmark"),
    wildcards=(_METHOD, _BUDGET),
    inputs=(_TEACHER, Arg("init", "the off-policy distilled codec (.pt) it starts from"),
            Arg("corpus", "corpus directory (val.txt: held-out windows)"),
            Arg("prompts", "NAME=DIR whose prompts the student continues: a synthetic task's train.jsonl, a "
                           "benchmark's (math_train's) test.jsonl, its rows", kind="named")),
    outputs=_CODEC_OUT,
    threads="on_policy.threads", ranks=True, device=True, size="train", progress=True, checkpoints=True)

MELT_TRAIN = JobSpec(
    "melt-train", "one MELT training stage from the frozen teacher (DeepSpeed, resumable)",
    # one recipe's stage settings (melt_recipes.stage_cfg): recipes with equal settings share a job
    reads=("seed", View("melt", "loopkv.jobs.views:melt_stage", depends=("melt",)), "model.dtype"),
    inputs=(_TEACHER, Arg("init", "stage 2: the stage-1 MELT model directory", required=False), _CORPUS, _TASKS),
    outputs=(Arg("out", "MELT model directory to write (best held-out state)"),),
    threads="melt.threads", ranks=True, device=True, size="train", progress=True, checkpoints=True)


def register(sub) -> None:
    add_command(sub, TEACHER_PRETRAIN, _pretrain)
    add_command(sub, DISTILL, _distill)
    add_command(sub, DISTILL_ABLATION, _distill_ablation)
    add_command(sub, DISTILL_ON_POLICY, _distill_on_policy)
    add_command(sub, MELT_TRAIN, _melt_train)


def _pretrain(job) -> None:
    from loopkv.train.pretrain import pretrain

    args, cfg = job.args, job.cfg
    with atomic_path(args.out) as tmp:
        curve = pretrain(cfg["teacher"], cfg["model"]["arch"], cfg["model"]["dtype"],
                         job.seed, args.corpus, args.tokenizer, job.named("task"), tmp, job.checkpoints,
                         progress=not args.no_progress, device=job.device)
        write_json(tmp / "train_curve.json", {"curve": curve, "provenance": job.prov.block()})


def _distill(job) -> None:
    _distill_job(job, job.cfg["distill"], "svd", ("distill", job.args.method, job.args.budget))


def _distill_ablation(job) -> None:
    from loopkv.errors import LoopKVError

    from loopkv.jobs.views import ABLATION_SECTIONS

    if job.args.method not in ABLATION_SECTIONS:
        raise LoopKVError(f"distilled variants are of {', '.join(ABLATION_SECTIONS)} (LLA Tables 10 and 14), "
                          f"not of {job.args.method}")
    cfg = dict(job.cfg["distill"])
    init = cfg.pop("init")   # the variant's codec init; the rest is the distillation's settings
    _distill_job(job, cfg, init, ("distill-ablation", job.args.method, job.args.budget, job.args.variant))


def _distill_job(job, cfg: dict, init: str, stream: tuple[str, ...]) -> None:
    """Distil the job's (method, budget) codec with distillation settings `cfg` from its `init`
    (LatentCodec.initialise), seeded by `stream`."""
    import torch

    from loopkv.analysis.calibration import load_calibration
    from loopkv.cache import make_cache
    from loopkv.cache.registry import codec_methods
    from loopkv.cache.settings import configured_setting, svd_codec
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher
    from loopkv.train.distill import distill_codec
    from loopkv.utils.seeding import derive_seed

    args, device = job.args, job.device
    if args.method not in codec_methods():
        raise LoopKVError(f"{args.method} has no codec to distil (codec methods: {', '.join(codec_methods())})")
    job.seed_everything(*stream)
    model = load_teacher(args.teacher, job.cfg["model"]["dtype"], device)
    tokenizer = load_tokenizer(args.teacher)
    setting = configured_setting(job.cfg["methods"], args.method, args.budget, model.config)
    codec = svd_codec(setting, model.config, load_calibration(args.calibration), init,
                      derive_seed(job.seed, "codec-init", *stream[1:]))
    codec = codec.to(device=device, dtype=model.dtype)
    view = make_cache(args.method, model.config, codec=codec)

    batches, val = _training_rows(tokenizer, args.corpus, job.named("task"), cfg, job.seed, "distill")
    result = distill_codec({**cfg, "dtype": job.cfg["model"]["dtype"]}, model, view,
                           batches, val, job.checkpoints,
                           progress=not args.no_progress)
    if not job.is_main:   # every rank holds the same result; one writes it
        return
    with atomic_path(args.out) as tmp:
        torch.save({"setting": setting, "codec_state": result["codec_state"], "best": result["best"]}, tmp)
    write_json(args.curve, {"setting": setting, "best": result["best"], "curve": result["curve"],
                            "recipe": {"init": init, "lambda_attn": cfg["lambda_attn"], "steps": cfg["steps"]},
                            "head_dim": model.config.head_dim,
                            "ranks": world_size(), "provenance": job.prov.block()})


def _distill_on_policy(job) -> None:
    import random

    import torch

    from loopkv.cache import make_cache
    from loopkv.cache.registry import codec_methods
    from loopkv.cache.settings import cache_factory, configured_setting, load_codec, read_codec_file
    from loopkv.data.benchmarks import BENCHMARKS
    from loopkv.data.encoding import encode_prompt, encode_text
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.data.windows import heldout_windows
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher
    from loopkv.train.distill import distill_codec
    from loopkv.train.on_policy import on_policy_batches, on_policy_heldout, prompt_texts
    from loopkv.utils.seeding import derive_seed

    args, device, cfg = job.args, job.device, job.cfg["on_policy"]
    if args.method not in codec_methods():
        raise LoopKVError(f"{args.method} has no codec to distil (codec methods: {', '.join(codec_methods())})")
    job.seed_everything("on-policy", args.method, args.budget)
    prompt_dirs = job.named("prompts")
    model = load_teacher(args.teacher, job.cfg["model"]["dtype"], device)
    tokenizer = load_tokenizer(args.teacher)
    setting = configured_setting(job.cfg["methods"], args.method, args.budget, model.config)
    saved = read_codec_file(args.init, setting)
    codec = load_codec(setting, model.config, saved["codec_state"], f"codec {args.init}")
    codec = codec.to(device=device, dtype=model.dtype)
    view = make_cache(args.method, model.config, codec=codec)
    # the student generates through the codec being trained (full-memory read: same values, faster)
    student_cache = cache_factory(setting, model.config, codec, read_path="full")
    # worked examples go before a benchmark's prompts only (synthetic prompts have none)
    encoded = [encode_prompt(tokenizer, text) for name, folder in prompt_dirs.items()
               for text in prompt_texts(name, Path(folder, "test.jsonl" if name in BENCHMARKS else "train.jsonl"),
                                        cfg["shots"] if name in BENCHMARKS else 0,
                                        derive_seed(job.seed, "on-policy-shots", name))]
    # a prompt that leaves no room for a generated token in the row trains nothing: left out, and counted
    prompts = [p for p in encoded if len(p) < cfg["seq_len"]]
    skipped = {"prompts": len(encoded), "too_long": len(encoded) - len(prompts),
               "longest": max(map(len, encoded), default=0), "seq_len": cfg["seq_len"]}
    if skipped["too_long"]:
        print(f"on-policy: {skipped['too_long']} of {len(encoded)} prompts are >= on_policy.seq_len "
              f"({cfg['seq_len']}) tokens (longest {skipped['longest']}): left out", flush=True)
    if len(prompts) <= cfg["eval_samples"]:
        raise LoopKVError(f"on_policy.eval_samples ({cfg['eval_samples']}) leaves no training prompts of {len(prompts)}"
                          + (f" ({skipped['too_long']} more were longer than on_policy.seq_len allows)"
                             if skipped["too_long"] else ""))
    # eval_samples prompts are held out, a seeded draw (a file's last rows may all be one kind: math_train's
    # are precalculus): the on-policy selection measurement continues them
    random.Random(derive_seed(job.seed, "on-policy-heldout")).shuffle(prompts)
    train_prompts, val_prompts = prompts[:-cfg["eval_samples"]], prompts[-cfg["eval_samples"]:]
    batches = on_policy_batches(model, student_cache, train_prompts, cfg, derive_seed(job.seed, "on-policy-data"))
    val = heldout_windows(encode_text(tokenizer, Path(args.corpus, "val.txt").read_text()), cfg["seq_len"],
                          cfg["eval_samples"])[:, :cfg["seq_len"]]
    result = distill_codec({**cfg, "dtype": job.cfg["model"]["dtype"]}, model, view, batches, val, job.checkpoints,
                           progress=not args.no_progress,
                           heldout=lambda d: on_policy_heldout(d, student_cache, val_prompts, cfg, val))
    if not job.is_main:   # every rank holds the same result; one writes it
        return
    with atomic_path(args.out) as tmp:
        torch.save({"setting": setting, "codec_state": result["codec_state"], "best": result["best"],
                    "on_policy": True}, tmp)
    write_json(args.curve, {"setting": setting, "best": result["best"], "curve": result["curve"],
                            "ranks": world_size(), "init_best": saved["best"], "prompt_lengths": skipped,
                            "provenance": job.prov.block()})


def _training_rows(tokenizer, corpus: str, task_dirs: dict, cfg: dict, seed: int, section: str):
    """(batches(step), validation windows) from the corpus and the tasks' training examples."""
    from loopkv.data.encoding import encode_text, load_task_examples
    from loopkv.data.windows import Mixture, heldout_windows
    from loopkv.utils.seeding import derive_seed

    corpus_ids = encode_text(tokenizer, Path(corpus, "train.txt").read_text())
    mixture = Mixture(corpus_ids, load_task_examples(tokenizer, task_dirs), cfg["mixture"], cfg["seq_len"],
                      tokenizer.eos_token_id, derive_seed(seed, f"{section}-data"), section=section)
    val = heldout_windows(encode_text(tokenizer, Path(corpus, "val.txt").read_text()), cfg["seq_len"],
                          cfg["eval_samples"])[:, :cfg["seq_len"]]
    return (lambda step: mixture.batch(step, cfg["batch_size"])), val


def _melt_train(job) -> None:
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher
    from loopkv.models.melt_gate import gate_variant
    from loopkv.models.melt_model import load_melt, melt_from_teacher, save_melt
    from loopkv.train.melt import train_melt_stage

    args, device = job.args, job.device
    cfg, dtype = job.cfg["melt"], job.cfg["model"]["dtype"]
    stage = cfg["stage"]
    if (stage == 2) != bool(args.init):
        raise LoopKVError("stage 2 starts from a stage-1 model (--init); stage 1 from the teacher alone")
    job.seed_everything("melt", f"stage{stage}")
    teacher = load_teacher(args.teacher, dtype, device)
    tokenizer = load_tokenizer(args.teacher)
    if stage == 1:
        # the view holds ema_decay only for a gate that reads it
        ema_decay = cfg["ema_decay"] if gate_variant(cfg["gate"]).reads_ema_decay else 0.5
        student = melt_from_teacher(teacher, cfg["gate"], ema_decay, cfg["chunk_size"])
    else:
        student = load_melt(args.init, dtype, train_chunk_size=cfg["chunk_size"], device=device).train().requires_grad_(True)
    batches, val = _training_rows(tokenizer, args.corpus, job.named("task"), cfg, job.seed, "melt")
    result = train_melt_stage({**cfg, "dtype": dtype}, teacher, student, stage, batches, val, job.checkpoints,
                              progress=not args.no_progress)
    if not job.is_main:   # every rank holds the same result; one writes it
        return
    student.load_state_dict(result["state"])
    with atomic_path(args.out) as tmp:
        save_melt(student, tmp, tokenizer)
        write_json(tmp / "train_curve.json", {"stage": stage, "best": result["best"], "curve": result["curve"],
                                              "ranks": world_size(), "provenance": job.prov.block()})
