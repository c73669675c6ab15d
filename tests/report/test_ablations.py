"""LLA Table 10 / Figure 12 from the variants' distillation curves: every value read from its curve,
the paper's KL matched by what a variant changes (not its name), each KL over the recipe's; and the
job slice of one variant (the short schedule, its own init, K share or loss weight)."""
import csv
import json

import pytest

from loopkv.errors import LoopKVError
from loopkv.report import ablations, tables
from loopkv.report.paper_values import TABLE10


def curve(init="svd", ranks=(24, 40), lam=0.5, kls=(0.02, 0.01, 0.008)):
    return {"setting": {"method": "lla", "budget": "4x", "ratio": 4.0, "kwargs": {"rank_k": ranks[0], "rank_v": ranks[1]}},
            "recipe": {"init": init, "lambda_attn": lam, "steps": 20},
            "curve": {"heldout": [{"step": 10 * i, "kl": kl, "top1": 0.9, "n_tokens": 4096} for i, kl in enumerate(kls)]},
            "best": {"step": 10 * kls.index(min(kls)), "kl": min(kls), "top1": 0.95}}


CURVES = {"full": curve(), "loop_one": curve(init="svd_loop1", kls=(0.05, 0.03, 0.02)),
          "noise": curve(init="random", kls=(2.0, 0.5, 0.1)), "even": curve(ranks=(32, 32), kls=(0.03, 0.02, 0.016)),
          "kl": curve(lam=0.0, kls=(0.02, 0.012, 0.009)), "two": curve(init="random", lam=0.0)}


def test_rows_read_each_curve_and_match_the_papers_row_by_what_changes():
    rows = {r["variant"]: r for r in ablations.build_rows(CURVES)}
    assert [r for r in rows] == list(CURVES)
    full, noise = rows["full"], rows["noise"]
    assert (full["kl_init"], full["kl_best"], full["ranks"], full["steps"]) == (0.02, 0.008, "24/40", 20)
    assert (noise["kl_init"], noise["kl_best"], noise["best_step"]) == (2.0, 0.1, 20)
    assert noise["kl_vs_full"] == pytest.approx(0.1 / 0.008) and full["kl_vs_full"] == 1.0
    # names are the user's; the paper's row follows from the one thing a variant changes
    assert {v: r["paper_row"] for v, r in rows.items()} == {"full": "full", "loop_one": "svd_loop1", "noise": "random_init",
                                                            "even": "symmetric", "kl": "kl_only", "two": None}
    assert rows["even"]["paper_kl"] == TABLE10["symmetric"] and rows["two"].get("paper_kl") is None
    assert rows["noise"]["paper_kl_vs_full"] == pytest.approx(0.771 / 0.105)


def test_the_recipes_row_must_come_first_and_every_curve_start_at_its_init():
    with pytest.raises(LoopKVError, match="first variant \\(noise\\) must be the recipe"):
        ablations.build_rows({"noise": CURVES["noise"], "full": CURVES["full"]})
    late = json.loads(json.dumps(CURVES["full"]))
    late["curve"]["heldout"] = late["curve"]["heldout"][1:]
    with pytest.raises(LoopKVError, match="no held-out KL at step 0"):
        ablations.build_rows({"full": late})


def test_table_and_figure_files(tmp_path):
    rows = ablations.build_rows(CURVES)
    tables.write_all(rows, ablations.SPEC, ablations.note(rows), "t", tmp_path / "t.pdf", tmp_path / "t.csv", tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert [r["variant"] for r in read] == list(CURVES) and read[2]["paper_row"] == "random_init"
    ablations.plot(rows, CURVES, tmp_path / "f.pdf", tmp_path / "f.png", 60)
    first = (tmp_path / "f.pdf").read_bytes()
    ablations.plot(rows, CURVES, tmp_path / "f.pdf", tmp_path / "f.png", 60)
    assert first.startswith(b"%PDF") and (tmp_path / "f.pdf").read_bytes() == first


def test_a_variants_job_slice_is_the_recipe_on_the_short_schedule_with_its_one_change():
    from loopkv.config import ablation_variants, load_config
    from loopkv.jobs.declared import job_spec
    from loopkv.jobs.slices import job_slice

    cfg = load_config({})
    assert ablation_variants(cfg) == ["full", "svd_loop1", "random_init", "symmetric", "kl_only"]
    spec = job_spec("distill-ablation")
    sliced = {v: job_slice(spec, cfg, {"method": "lla", "budget": "4x", "variant": v}) for v in ablation_variants(cfg)}
    short = {k: v for k, v in sliced["full"]["distill"].items() if k not in ("steps", "eval_every", "checkpoint_every", "init")}
    assert short == {k: v for k, v in cfg["distill"].items() if k not in ("steps", "eval_every", "checkpoint_every", "threads")}
    assert (sliced["full"]["distill"]["steps"], sliced["full"]["distill"]["init"]) == (50, "svd")
    assert sliced["random_init"]["distill"]["init"] == "random" and sliced["kl_only"]["distill"]["lambda_attn"] == 0.0
    assert sliced["symmetric"]["methods"]["k_share"] == 0.5 and sliced["full"]["methods"]["k_share"] == 0.375
    # each variant differs from the recipe's slice only where it says
    differ = {v: sorted({(s, k) for s in ("distill", "methods") for k in set(sliced[v][s]) | set(sliced["full"][s])
                         if sliced[v][s].get(k) != sliced["full"][s].get(k)}) for v in sliced}
    assert differ == {"full": [], "svd_loop1": [("distill", "init")], "random_init": [("distill", "init")],
                      "symmetric": [("methods", "k_share")], "kl_only": [("distill", "lambda_attn")]}


def test_the_config_names_a_recipe_row_and_a_null_budget_or_variant_leaves_it_out():
    from loopkv.config import ablation_variants, load_config

    with pytest.raises(LoopKVError, match="distill_ablations.variants': no variant is the recipe"):
        load_config({"distill_ablations": {"variants": {"full": None}}})
    assert ablation_variants(load_config({"distill_ablations": {"budget": None}})) == []
    # an overlay's labels come first in the merge; the recipe's row leads whatever the order
    assert ablation_variants(load_config({"distill_ablations": {"variants": {"kl_only": None, "extra": {"init": "random"}}}})) == \
        ["full", "extra", "svd_loop1", "random_init", "symmetric"]
    with pytest.raises(LoopKVError, match="distill_ablations.budget': unknown budget label '7x'"):
        load_config({"distill_ablations": {"budget": "7x"}})
