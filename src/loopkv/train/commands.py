"""Subcommands: teacher-pretrain, distill, distill-on-policy, melt-train."""
from __future__ import annotations

from pathlib import Path

from loopkv.cli_args import add_device_arg, json_arg, named_path
from loopkv.train.launch import is_main_process, relaunch_on_ranks, world_size
from loopkv.utils.atomic import atomic_path, write_json
from loopkv.utils.provenance import Provenance


def register(sub) -> None:
    p = sub.add_parser("teacher-pretrain", help="pretrain the tiny looped teacher (resumable)")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"teacher": ..., "model": ...} config slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--corpus", required=True, help="corpus directory (train.txt, val.txt)")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with train.jsonl")
    p.add_argument("--out", required=True, help="model directory to write (save_pretrained)")
    p.add_argument("--checkpoints", required=True, help="directory for resumable checkpoints")
    p.add_argument("--no-progress", action="store_true")
    add_device_arg(p)
    p.set_defaults(func=_pretrain)

    p = sub.add_parser("distill", help="distil a KV method's codec from the frozen teacher (DeepSpeed, resumable)")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"distill", "methods", "model"} config slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--method", required=True, help="a codec method: lla, lla2d, mla_head")
    p.add_argument("--budget", required=True, help="a budget label of methods.budgets, e.g. 4x")
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--calibration", required=True, help="calibration state (.pt) for the SVD init")
    p.add_argument("--corpus", required=True, help="corpus directory (train.txt, val.txt)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with train.jsonl")
    p.add_argument("--out", required=True, help="distilled codec (.pt)")
    p.add_argument("--curve", required=True, help="training curve JSON")
    p.add_argument("--checkpoints", required=True, help="directory for resumable DeepSpeed checkpoints")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the job, split over its ranks (not part of the result)")
    p.add_argument("--ranks", type=int, default=1,
                   help="DeepSpeed ranks on this node (> 1: relaunch under torchrun; not part of the result)")
    p.add_argument("--no-progress", action="store_true")
    add_device_arg(p)
    p.set_defaults(func=_distill)


    p = sub.add_parser("distill-on-policy",
                       help="continue a distilled codec on the student's own generations (LLA Eq. 6-7; DeepSpeed, resumable)")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"on_policy", "methods", "model"} config slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--method", required=True, help="a codec method: lla, lla2d, mla_head")
    p.add_argument("--budget", required=True, help="a budget label of methods.budgets")
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--init", required=True, help="the off-policy distilled codec (.pt) it starts from")
    p.add_argument("--corpus", required=True, help="corpus directory (val.txt: held-out windows)")
    p.add_argument("--prompts", type=named_path, action="append", required=True,
                   help="NAME=DIR whose train.jsonl prompts the student continues")
    p.add_argument("--out", required=True, help="on-policy codec (.pt)")
    p.add_argument("--curve", required=True, help="training curve JSON")
    p.add_argument("--checkpoints", required=True, help="directory for resumable DeepSpeed checkpoints")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the job, split over its ranks (not part of the result)")
    p.add_argument("--ranks", type=int, default=1,
                   help="DeepSpeed ranks on this node (> 1: relaunch under torchrun; not part of the result)")
    p.add_argument("--no-progress", action="store_true")
    add_device_arg(p)
    p.set_defaults(func=_distill_on_policy)

    p = sub.add_parser("melt-train", help="one MELT training stage from the frozen teacher (DeepSpeed, resumable)")
    p.add_argument("--cfg", type=json_arg, required=True,
                   help='{"melt": a stage slice (melt_recipes.stage_cfg), "model": ...}')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--teacher", required=True, help="teacher model directory")
    p.add_argument("--init", help="stage 2: the stage-1 MELT model directory")
    p.add_argument("--corpus", required=True, help="corpus directory (train.txt, val.txt)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with train.jsonl")
    p.add_argument("--out", required=True, help="MELT model directory to write (best held-out state)")
    p.add_argument("--checkpoints", required=True, help="directory for resumable DeepSpeed checkpoints")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the job, split over its ranks (not part of the result)")
    p.add_argument("--ranks", type=int, default=1,
                   help="DeepSpeed ranks on this node (> 1: relaunch under torchrun; not part of the result)")
    p.add_argument("--no-progress", action="store_true")
    add_device_arg(p)
    p.set_defaults(func=_melt_train)


def _pretrain(args) -> None:
    from loopkv.train.pretrain import pretrain
    from loopkv.utils.device import resolve_device

    task_dirs = dict(args.task)
    prov = Provenance(args.cfg, args.seed, {"corpus": args.corpus, "tokenizer": args.tokenizer,
                                            **{f"task:{k}": v for k, v in task_dirs.items()}})
    # checkpoints are keyed by config + inputs: a rerun after an edit never resumes foreign state
    checkpoints = Path(args.checkpoints) / prov.key()
    checkpoints.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out) as tmp:
        curve = pretrain(args.cfg["teacher"], args.cfg["model"]["arch"], args.cfg["model"]["dtype"],
                         args.seed, args.corpus, args.tokenizer, task_dirs, tmp, checkpoints,
                         progress=not args.no_progress, device=resolve_device(args.device))
        write_json(tmp / "train_curve.json", {"curve": curve, "provenance": prov.block()})


def _distill(args) -> None:
    import torch

    from loopkv.analysis.calibration import load_calibration
    from loopkv.cache import make_cache
    from loopkv.cache.settings import CODEC_METHODS, configured_setting, svd_codec
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher
    from loopkv.train.distill import distill_codec
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed, seed_everything

    relaunch_on_ranks(args.ranks, args.argv)
    device = resolve_device(args.device)
    cfg = args.cfg["distill"]
    if args.method not in CODEC_METHODS:
        raise LoopKVError(f"{args.method} has no codec to distil (codec methods: {', '.join(CODEC_METHODS)})")
    torch.set_num_threads(max(1, args.threads // args.ranks))   # the job's threads, split over its ranks
    seed_everything(derive_seed(args.seed, "distill", args.method, args.budget))
    task_dirs = dict(args.task)
    prov = Provenance({**args.cfg, "method": args.method, "budget": args.budget}, args.seed,
                      {"teacher": args.teacher, "calibration": args.calibration, "corpus": args.corpus,
                       **{f"task:{k}": v for k, v in task_dirs.items()}})
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"], device)
    tokenizer = load_tokenizer(args.teacher)
    setting = configured_setting(args.cfg["methods"], args.method, args.budget, model.config)
    codec = svd_codec(setting, model.config, load_calibration(args.calibration)).to(device=device, dtype=model.dtype)
    view = make_cache(args.method, model.config, codec=codec)

    batches, val = _training_rows(tokenizer, args.corpus, task_dirs, cfg, args.seed, "distill")
    # checkpoints keyed by config + inputs: a rerun after an edit never resumes foreign state
    checkpoints = Path(args.checkpoints) / prov.key()
    result = distill_codec({**cfg, "dtype": args.cfg["model"]["dtype"]}, model, view,
                           batches, val, checkpoints,
                           progress=not args.no_progress)
    if not is_main_process():   # every rank holds the same result; one writes it
        return
    with atomic_path(args.out) as tmp:
        torch.save({"setting": setting, "codec_state": result["codec_state"], "best": result["best"]}, tmp)
    write_json(args.curve, {"setting": setting, "best": result["best"], "curve": result["curve"],
                            "ranks": world_size(), "provenance": prov.block()})


def _distill_on_policy(args) -> None:
    import torch

    from loopkv.cache import make_cache
    from loopkv.cache.settings import CODEC_METHODS, cache_factory, configured_setting, load_codec, read_codec_file
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher
    from loopkv.train.distill import distill_codec
    from loopkv.train.mixture import encode_prompt, encode_text, heldout_windows
    from loopkv.train.on_policy import on_policy_batches, on_policy_heldout
    from loopkv.utils.atomic import read_jsonl
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed, seed_everything

    relaunch_on_ranks(args.ranks, args.argv)
    device = resolve_device(args.device)
    cfg = args.cfg["on_policy"]
    if args.method not in CODEC_METHODS:
        raise LoopKVError(f"{args.method} has no codec to distil (codec methods: {', '.join(CODEC_METHODS)})")
    torch.set_num_threads(max(1, args.threads // args.ranks))   # the job's threads, split over its ranks
    seed_everything(derive_seed(args.seed, "on-policy", args.method, args.budget))
    prompt_dirs = dict(args.prompts)
    prov = Provenance({**args.cfg, "method": args.method, "budget": args.budget}, args.seed,
                      {"teacher": args.teacher, "init": args.init, "corpus": args.corpus,
                       **{f"prompts:{k}": v for k, v in prompt_dirs.items()}})
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"], device)
    tokenizer = load_tokenizer(args.teacher)
    setting = configured_setting(args.cfg["methods"], args.method, args.budget, model.config)
    saved = read_codec_file(args.init, setting)
    codec = load_codec(setting, model.config, saved["codec_state"], f"codec {args.init}")
    codec = codec.to(device=device, dtype=model.dtype)
    view = make_cache(args.method, model.config, codec=codec)
    # the student generates through the codec being trained (full-memory read: same values, faster)
    student_cache = cache_factory(setting, model.config, codec, read_path="full")
    prompts = [encode_prompt(tokenizer, row["prompt"]) for d in prompt_dirs.values()
               for row in read_jsonl(Path(d, "train.jsonl"), "task data", {"prompt": str})]
    if len(prompts) <= cfg["eval_samples"]:
        raise LoopKVError(f"on_policy.eval_samples ({cfg['eval_samples']}) leaves no training prompts of {len(prompts)}")
    # the last eval_samples prompts are held out: the on-policy selection measurement continues them
    train_prompts, val_prompts = prompts[:-cfg["eval_samples"]], prompts[-cfg["eval_samples"]:]
    batches = on_policy_batches(model, student_cache, train_prompts, cfg, derive_seed(args.seed, "on-policy-data"))
    val = heldout_windows(encode_text(tokenizer, Path(args.corpus, "val.txt").read_text()), cfg["seq_len"],
                          cfg["eval_samples"])[:, :cfg["seq_len"]]
    checkpoints = Path(args.checkpoints) / prov.key()   # never resume a run of another config
    result = distill_codec({**cfg, "dtype": args.cfg["model"]["dtype"]}, model, view, batches, val, checkpoints,
                           progress=not args.no_progress,
                           heldout=lambda d: on_policy_heldout(d, student_cache, val_prompts, cfg, val))
    if not is_main_process():   # every rank holds the same result; one writes it
        return
    with atomic_path(args.out) as tmp:
        torch.save({"setting": setting, "codec_state": result["codec_state"], "best": result["best"],
                    "on_policy": True}, tmp)
    write_json(args.curve, {"setting": setting, "best": result["best"], "curve": result["curve"],
                            "ranks": world_size(), "init_best": saved["best"], "provenance": prov.block()})


def _training_rows(tokenizer, corpus: str, task_dirs: dict, cfg: dict, seed: int, section: str):
    """(batches(step), validation windows) from the corpus and the tasks' training examples."""
    from loopkv.train.mixture import Mixture, encode_text, heldout_windows, load_task_examples
    from loopkv.utils.seeding import derive_seed

    corpus_ids = encode_text(tokenizer, Path(corpus, "train.txt").read_text())
    mixture = Mixture(corpus_ids, load_task_examples(tokenizer, task_dirs), cfg["mixture"], cfg["seq_len"],
                      tokenizer.eos_token_id, derive_seed(seed, f"{section}-data"), section=section)
    val = heldout_windows(encode_text(tokenizer, Path(corpus, "val.txt").read_text()), cfg["seq_len"],
                          cfg["eval_samples"])[:, :cfg["seq_len"]]
    return (lambda step: mixture.batch(step, cfg["batch_size"])), val


def _melt_train(args) -> None:
    import torch

    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.errors import LoopKVError
    from loopkv.models.loading import load_teacher
    from loopkv.models.melt_model import load_melt, melt_from_teacher, save_melt
    from loopkv.train.melt import train_melt_stage
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed, seed_everything

    relaunch_on_ranks(args.ranks, args.argv)
    device = resolve_device(args.device)
    cfg, dtype = args.cfg["melt"], args.cfg["model"]["dtype"]
    stage = cfg["stage"]
    if (stage == 2) != bool(args.init):
        raise LoopKVError("stage 2 starts from a stage-1 model (--init); stage 1 from the teacher alone")
    torch.set_num_threads(max(1, args.threads // args.ranks))   # the job's threads, split over its ranks
    seed_everything(derive_seed(args.seed, "melt", f"stage{stage}"))
    task_dirs = dict(args.task)
    inputs = {"teacher": args.teacher, "corpus": args.corpus, **{f"task:{k}": v for k, v in task_dirs.items()}}
    if args.init:
        inputs["init"] = args.init
    prov = Provenance(args.cfg, args.seed, inputs)
    teacher = load_teacher(args.teacher, dtype, device)
    tokenizer = load_tokenizer(args.teacher)
    if stage == 1:
        student = melt_from_teacher(teacher, cfg["gate"], cfg.get("ema_decay", 0.5), cfg["chunk_size"])
    else:
        student = load_melt(args.init, dtype, train_chunk_size=cfg["chunk_size"], device=device).train().requires_grad_(True)
    batches, val = _training_rows(tokenizer, args.corpus, task_dirs, cfg, args.seed, "melt")
    checkpoints = Path(args.checkpoints) / prov.key()   # never resume a run of another config
    result = train_melt_stage({**cfg, "dtype": dtype}, teacher, student, stage, batches, val, checkpoints,
                              progress=not args.no_progress)
    if not is_main_process():   # every rank holds the same result; one writes it
        return
    student.load_state_dict(result["state"])
    with atomic_path(args.out) as tmp:
        save_melt(student, tmp, tokenizer)
        write_json(tmp / "train_curve.json", {"stage": stage, "best": result["best"], "curve": result["curve"],
                                              "ranks": world_size(), "provenance": prov.block()})
