"""Subcommands: calibrate (teacher K/V moments and samples), cross-loop-structure (the measures
behind LLA Figure 2), plot-cross-loop (the figure itself)."""
from __future__ import annotations

from pathlib import Path

from loopkv.cli_args import add_device_arg, json_arg, named_path
from loopkv.utils.atomic import atomic_path, write_json
from loopkv.utils.provenance import Provenance


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="capture the teacher's pre-RoPE K/V on calibration prompts")
    p.add_argument("--cfg", type=json_arg, required=True, help='{"calibration": ..., "model": ...} slice')
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--teacher", required=True, help="teacher model directory (with its tokenizer)")
    p.add_argument("--corpus", required=True, help="corpus directory (val.txt is the calibration text)")
    p.add_argument("--task", type=named_path, action="append", default=[], help="NAME=DIR with train.jsonl")
    p.add_argument("--out", required=True, help="calibration state (.pt)")
    p.add_argument("--manifest", required=True, help="JSON: stats and provenance")
    add_device_arg(p)
    p.set_defaults(func=_calibrate)

    p = sub.add_parser("cross-loop-structure", help="spectra, variance split, convergence (LLA Figure 2)")
    p.add_argument("--calibration", required=True)
    p.add_argument("--out", required=True, help="JSON with the measured structure and the paper's values")
    p.set_defaults(func=_structure)

    p = sub.add_parser("plot-cross-loop", help="LLA Figure 2 from cross-loop-structure's JSON")
    p.add_argument("--cfg", type=json_arg, required=True, help="the report config slice")
    p.add_argument("--structure", required=True)
    p.add_argument("--figure", required=True, help="PDF path; a PNG is written beside it")
    p.set_defaults(func=_plot)


def _calibrate(args) -> None:
    import torch

    from loopkv.analysis.calibration import run_calibration
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.models.loading import load_teacher
    from loopkv.train.mixture import Mixture, encode_text, load_task_examples
    from loopkv.utils.device import resolve_device
    from loopkv.utils.seeding import derive_seed

    cfg = args.cfg["calibration"]
    torch.set_num_threads(cfg["threads"])
    task_dirs = dict(args.task)
    prov = Provenance(args.cfg, args.seed, {"teacher": args.teacher, "corpus": args.corpus,
                                            **{f"task:{k}": v for k, v in task_dirs.items()}})
    model = load_teacher(args.teacher, args.cfg["model"]["dtype"], resolve_device(args.device))
    tokenizer = load_tokenizer(args.teacher)
    # held-out corpus text and the tasks' training examples: never the test items
    corpus = encode_text(tokenizer, Path(args.corpus, "val.txt").read_text())
    mixture = Mixture(corpus, load_task_examples(tokenizer, task_dirs), cfg["mixture"], cfg["seq_len"],
                      tokenizer.eos_token_id, derive_seed(args.seed, "calibration-data"), section="calibration")
    rows = mixture.batch(0, cfg["num_prompts"])[:, :-1]
    calibration = run_calibration(model, rows, cfg["batch_size"], tuple(cfg["layouts"]), cfg["sample_tokens"],
                                  derive_seed(args.seed, "calibration-sample"))
    with atomic_path(args.out) as tmp:
        torch.save(calibration.state(), tmp)
    stats = {"prompts": int(rows.shape[0]), "tokens": int(rows.numel()),
             "sampled_tokens": int(calibration.sample_tensor().shape[1]), "layouts": list(calibration.layouts)}
    write_json(args.manifest, {"stats": stats, "provenance": prov.block()})


def _structure(args) -> None:
    from loopkv.analysis.calibration import read_calibration_state
    from loopkv.analysis.spectra import cross_loop_structure
    from loopkv.errors import LoopKVError
    from loopkv.report.paper_values import FIG2_CROSS_LOOP

    prov = Provenance(None, None, {"calibration": args.calibration})
    samples = read_calibration_state(args.calibration)["samples"].float()
    if not samples.numel():
        raise LoopKVError(f"calibration {args.calibration} holds no sampled tokens (calibration.sample_tokens is 0)")
    result = cross_loop_structure(samples[0], samples[1])
    result["n_tokens"] = int(samples.shape[1])
    result["title"] = (f"teacher K/V cross-loop structure ({samples.shape[1]} sampled tokens, "
                       f"D={samples.shape[2]} H={samples.shape[3]} T={samples.shape[4]})")
    write_json(args.out, {"measured": result, "paper": FIG2_CROSS_LOOP, "provenance": prov.block()})


# what cross-loop-structure writes and plot-cross-loop reads (report/fig_cross_loop.py)
_NUMBER = (int, float)
_SPECTRUM = {"normalized_effective_rank": _NUMBER, "first_direction_energy": _NUMBER}
_MEASURED_KIND = {"spectra": {axis: _SPECTRUM for axis in ("loop", "head", "layer")},
                  "convergence": {"cosine_to_final": list, "relative_change": list},
                  "loop_variance_share": _NUMBER}
STRUCTURE_FIELDS = {"measured": {"k": _MEASURED_KIND, "v": _MEASURED_KIND},
                    "paper": {"loop_normalized_effective_rank": list, "loop_first_direction_energy": _NUMBER,
                              "loop_variance_share": {"k": _NUMBER, "v": _NUMBER}}}


def _plot(args) -> None:
    from loopkv.report.fig_cross_loop import plot_cross_loop_structure
    from loopkv.utils.checked_io import read_json

    structure = read_json(args.structure, "cross-loop structure", fields=STRUCTURE_FIELDS)
    figure = Path(args.figure)
    with atomic_path(figure) as pdf, atomic_path(figure.with_suffix(".png")) as png:
        plot_cross_loop_structure(structure["measured"], structure["paper"], pdf, png, dpi=args.cfg["dpi"])
