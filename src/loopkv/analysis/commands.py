"""Subcommands: calibrate (teacher K/V moments and samples), cross-loop-structure (the measures
behind LLA Figure 2), plot-cross-loop (the figure itself)."""
from __future__ import annotations

from pathlib import Path

from loopkv.jobs import Arg, JobSpec
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import atomic_path, write_json


CALIBRATE = JobSpec(
    "calibrate", "capture the teacher's pre-RoPE K/V on calibration prompts",
    reads=("seed", "calibration", "model.dtype"),
    inputs=(Arg("teacher", "teacher model directory (with its tokenizer)"),
            Arg("corpus", "corpus directory (val.txt is the calibration text)"),
            Arg("task", "NAME=DIR with train.jsonl", kind="named", required=False)),
    outputs=(Arg("out", "calibration state (.pt)"), Arg("manifest", "JSON: stats and provenance")),
    threads="calibration.threads", device=True, size="eval")

CROSS_LOOP_STRUCTURE = JobSpec(
    "cross-loop-structure", "spectra, variance split, convergence (LLA Figure 2)",
    inputs=(Arg("calibration", "calibration state (.pt)"),),
    outputs=(Arg("out", "JSON with the measured structure and the paper's values"),))

PLOT_CROSS_LOOP = JobSpec(
    "plot-cross-loop", "LLA Figure 2 (Figure 4 on Huginn) from cross-loop-structure's JSON",
    reads=("report.dpi", "report.paper_model"),
    inputs=(Arg("structure", "cross-loop-structure's JSON"),),
    outputs=(Arg("figure", "PDF path; a PNG is written beside it"),))

PLOT_TRAJECTORIES = JobSpec(
    "plot-trajectories", "LLA Figure 3 (cross-loop trajectories) from cross-loop-structure's JSON",
    reads=("report.dpi",),
    inputs=(Arg("structure", "cross-loop-structure's JSON"),),
    outputs=(Arg("pdf", "the figure (PDF)"), Arg("png", "the figure (PNG)")))


def register(sub) -> None:
    add_command(sub, CALIBRATE, _calibrate)

    add_command(sub, CROSS_LOOP_STRUCTURE, _structure)
    add_command(sub, PLOT_CROSS_LOOP, _plot)
    add_command(sub, PLOT_TRAJECTORIES, _plot_trajectories)


def _calibrate(job) -> None:
    import torch

    from loopkv.analysis.calibration import run_calibration
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.models.loading import load_teacher
    from loopkv.data.encoding import encode_text, load_task_examples
    from loopkv.data.windows import Mixture
    from loopkv.utils.seeding import derive_seed, fixed_draws

    args, cfg, task_dirs = job.args, job.cfg["calibration"], job.named("task")
    model = load_teacher(args.teacher, job.cfg["model"]["dtype"], job.device)
    tokenizer = load_tokenizer(args.teacher)
    # held-out corpus text and the tasks' training examples: never the test items
    corpus = encode_text(tokenizer, Path(args.corpus, "val.txt").read_text())
    mixture = Mixture(corpus, load_task_examples(tokenizer, task_dirs), cfg["mixture"], cfg["seq_len"],
                      tokenizer.eos_token_id, derive_seed(job.seed, "calibration-data"), section="calibration")
    rows = mixture.batch(0, cfg["num_prompts"])[:, :-1]
    # the model's own draws (Huginn's initial states) are the run's seed's
    with fixed_draws(derive_seed(job.seed, "calibration-states"), job.device):
        calibration = run_calibration(model, rows, cfg["batch_size"], tuple(cfg["layouts"]), cfg["sample_tokens"],
                                      derive_seed(job.seed, "calibration-sample"))
    with atomic_path(args.out) as tmp:
        torch.save(calibration.state(), tmp)
    stats = {"prompts": int(rows.shape[0]), "tokens": int(rows.numel()),
             "sampled_tokens": int(calibration.sample_tensor().shape[1]), "layouts": list(calibration.layouts)}
    write_json(args.manifest, {"stats": stats, "provenance": job.prov.block()})


def _structure(job) -> None:
    from loopkv.analysis.axis_error import AXIS_LAYOUTS, axis_errors
    from loopkv.analysis.calibration import Calibration, read_calibration_state
    from loopkv.analysis.spectra import cross_loop_structure
    from loopkv.errors import LoopKVError
    from loopkv.report.paper_values import FIG2_CROSS_LOOP

    args = job.args
    state = read_calibration_state(args.calibration)
    samples = state["samples"].float()
    if not samples.numel():
        raise LoopKVError(f"calibration {args.calibration} holds no sampled tokens (calibration.sample_tokens is 0)")
    result = cross_loop_structure(samples[0], samples[1])
    result["n_tokens"] = int(samples.shape[1])
    calibration = Calibration.from_state(state)
    if all(layout in calibration.layouts for layout in AXIS_LAYOUTS.values()):   # over every calibration token
        _, _, layers, heads, loops, head_dim = samples.shape
        result["svd_error_by_axis"] = axis_errors(calibration, loops, heads, head_dim)
        result["svd_error_tokens"] = calibration.moments["per_head", "k"].count
    result["title"] = (f"teacher K/V cross-loop structure ({samples.shape[1]} sampled tokens, "
                       f"D={samples.shape[2]} H={samples.shape[3]} T={samples.shape[4]})")
    write_json(args.out, {"measured": result, "paper": FIG2_CROSS_LOOP, "provenance": job.prov.block()})


# what cross-loop-structure writes and plot-cross-loop reads (report/fig_cross_loop.py)
_NUMBER = (int, float)
_SPECTRUM = {"normalized_effective_rank": _NUMBER, "first_direction_energy": _NUMBER}
_MEASURED_KIND = {"spectra": {axis: _SPECTRUM for axis in ("loop", "head", "layer")},
                  "convergence": {"cosine_to_final": list, "relative_change": list},
                  "loop_variance_share": _NUMBER}
STRUCTURE_FIELDS = {"measured": {"k": _MEASURED_KIND, "v": _MEASURED_KIND},
                    "paper": {"loop_normalized_effective_rank": list, "loop_first_direction_energy": _NUMBER,
                              "loop_variance_share": {"k": _NUMBER, "v": _NUMBER}}}


def _plot(job) -> None:
    from loopkv.report.fig_cross_loop import plot_cross_loop_structure
    from loopkv.utils.checked_io import read_json

    args = job.args
    structure = read_json(args.structure, "cross-loop structure", fields=STRUCTURE_FIELDS)
    figure = Path(args.figure)
    with atomic_path(figure) as pdf, atomic_path(figure.with_suffix(".png")) as png:
        # the structure's paper values are Figure 2's (Ouro-1.4B); LLA Figure 4 (Huginn) states none
        paper = None if job.cfg["report"]["paper_model"].startswith("Huginn") else structure["paper"]
        plot_cross_loop_structure(structure["measured"], paper, pdf, png, dpi=job.cfg["report"]["dpi"])


def _plot_trajectories(job) -> None:
    from loopkv.report import fig_trajectories
    from loopkv.utils.checked_io import read_json

    args = job.args
    structure = read_json(args.structure, "cross-loop structure", fields=STRUCTURE_FIELDS)
    fig_trajectories.check(structure["measured"], f"cross-loop structure {args.structure}")
    with atomic_path(args.pdf) as pdf, atomic_path(args.png) as png:
        fig_trajectories.plot(structure["measured"], pdf, png, job.cfg["report"]["dpi"],
                              structure["measured"].get("title", "teacher's K/V"))
