"""LLA Table 14 from the curves of Table 10's recipe (full RoPE) and the decoupled-RoPE variants: every
value read from its curve, the paper's row matched by what a variant is (the share of the head kept
rotated, the adapter, a longer schedule), not by its name; the job slice of each variant; the config's
refusals, naming the variant."""
import csv
import json

import pytest

from loopkv.errors import LoopKVError
from loopkv.report import decoupled_table, tables


def curve(d_rope=None, adapter=False, steps=50, kls=(0.3, 0.2), ranks=(18, 30), head_dim=32):
    kwargs = {"rank_k": ranks[0], "rank_v": ranks[1]}
    if d_rope is not None:
        kwargs |= {"d_rope": d_rope, "query_adapter": adapter}
    return {"setting": {"method": "lla" if d_rope is None else "lla_decoupled", "budget": "4x", "ratio": 4.0,
                        "kwargs": kwargs},
            "recipe": {"init": "svd", "lambda_attn": 0.5, "steps": steps}, "head_dim": head_dim,
            "curve": {"heldout": [{"step": 10 * i, "kl": kl, "top1": 0.7, "n_tokens": 4096} for i, kl in enumerate(kls)]},
            "best": {"step": 10 * kls.index(min(kls)), "kl": min(kls), "top1": 0.75}}


CURVES = {"full": curve(kls=(0.009, 0.006), ranks=(24, 40)), "plain": curve(16), "with_map": curve(16, True, kls=(0.3, 0.1)),
          "long": curve(16, True, 150, kls=(0.3, 0.05)), "narrow": curve(8, True, ranks=(21, 35), kls=(0.7, 0.4)),
          "odd": curve(12, True)}


def test_rows_read_each_curve_and_match_the_papers_row_by_what_a_variant_is():
    rows = {r["variant"]: r for r in decoupled_table.build_rows(CURVES)}
    assert list(rows) == list(CURVES)
    assert {v: r["paper_row"] for v, r in rows.items()} == {
        "full": "full_rope", "plain": "d0.5_plain_short", "with_map": "d0.5_adapter_short",
        "long": "d0.5_adapter_longer", "narrow": "d0.25_adapter_short", "odd": None}   # 12 of 32: no paper row
    full, narrow = rows["full"], rows["narrow"]
    assert (full["rope"], full["ranks"], full["kl_best"], full["kl_vs_full"]) == ("full", "24/-/40", 0.006, 1.0)
    assert (narrow["ranks"], narrow["kl_init"], narrow["kl_best"], narrow["steps"]) == ("21/8/35", 0.7, 0.4, 50)
    assert narrow["kl_vs_full"] == pytest.approx(0.4 / 0.006)
    assert (rows["long"]["paper_kl"], rows["long"]["paper_top1"]) == (0.30, 0.88)
    assert (full["paper_kl"], rows["narrow"]["paper_kl"]) == (0.059, 1.04) and "paper_kl" not in rows["odd"]


def test_the_full_rope_row_comes_first_and_a_curve_must_state_its_head():
    with pytest.raises(LoopKVError, match="first curve must be full-RoPE"):
        decoupled_table.build_rows({"plain": CURVES["plain"], "full": CURVES["full"]})
    headless = json.loads(json.dumps(CURVES["plain"]))
    del headless["head_dim"]
    with pytest.raises(LoopKVError, match="does not state a head_dim"):
        decoupled_table.build_rows({"full": CURVES["full"], "plain": headless})
    other = json.loads(json.dumps(CURVES["plain"]))
    other["setting"]["budget"] = "2x"
    with pytest.raises(LoopKVError, match="budget 4x"):
        decoupled_table.build_rows({"full": CURVES["full"], "plain": other})


def test_table_files(tmp_path):
    rows = decoupled_table.build_rows(CURVES)
    tables.write_all(rows, decoupled_table.SPEC, decoupled_table.note(rows), "t", tmp_path / "t.pdf",
                     tmp_path / "t.csv", tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert [r["variant"] for r in read] == list(CURVES) and read[3]["paper_row"] == "d0.5_adapter_longer"
    assert (tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")


def test_each_variants_job_slice_sets_what_it_says_on_table_10s_schedule():
    from loopkv.config import decoupled_variants, load_config
    from loopkv.jobs.declared import job_spec
    from loopkv.jobs.slices import job_slice

    cfg = load_config({})
    assert decoupled_variants(cfg) == ["no_adapter", "adapter", "longer", "narrow_rope"]
    spec = job_spec("distill-ablation")
    sliced = {v: job_slice(spec, cfg, {"method": "lla_decoupled", "budget": "4x", "variant": v})
              for v in decoupled_variants(cfg)}
    recipe = job_slice(spec, cfg, {"method": "lla", "budget": "4x", "variant": "full"})
    assert {v: (s["methods"]["rope_share"], s["methods"]["query_adapter"], s["distill"]["steps"])
            for v, s in sliced.items()} == {"no_adapter": (0.5, False, 50), "adapter": (0.5, True, 50),
                                            "longer": (0.5, True, 150), "narrow_rope": (0.25, True, 50)}
    # the distillation recipe is Table 10's, but for the schedule
    schedule = ("steps", "warmup_steps")
    assert {k: v for k, v in sliced["longer"]["distill"].items() if k not in schedule} == \
        {k: v for k, v in recipe["distill"].items() if k not in schedule}
    assert not {"rope_share", "query_adapter"} & set(recipe["methods"])   # lla reads neither: not in its slice


def test_a_variant_that_does_not_fit_is_refused_naming_it():
    from loopkv.config import decoupled_variants, load_config

    with pytest.raises(LoopKVError, match="decoupled_rope.variants.narrow_rope': lla_decoupled at 4x: methods.rope_share "
                                          "= 0.99 of d_head 32 keeps 32 dims rotated"):
        load_config({"decoupled_rope": {"variants": {"narrow_rope": {"rope_share": 0.99}}}})
    # 21.33x leaves 12 values a head: half the head (16 dims) does not fit
    with pytest.raises(LoopKVError, match="decoupled_rope.variants.wide': lla_decoupled at 21.33x: methods.rope_share "
                                          "= 0.5 .d_rope 16. leaves -4"):
        load_config({"decoupled_rope": {"variants": {"wide": {"rope_share": 0.5}}},
                     "distill_ablations": {"budget": "21.33x"}})
    # 30 of 32 dims rotated: r_k 13 of the 34 left, but the content latent spans only 4 x 2 dims
    with pytest.raises(LoopKVError, match="decoupled_rope.variants.wide': .*r_k 13, r_v 21: r_k must be at most the "
                                          "content width T x .d_head - d_rope. = 8"):
        load_config({"decoupled_rope": {"variants": {"wide": {"rope_share": 0.95}}}})
    assert decoupled_variants(load_config({"distill_ablations": {"budget": None}})) == []   # off with Table 10
    # not on Huginn (lla_decoupled serves no model with non-looped layers), even with Table 10 on
    import yaml

    raw = yaml.safe_load(open("config/huginn-tiny.yaml")) | {"distill_ablations": {"budget": "16x"}}
    huginn = load_config(raw, check_paths=False)
    assert decoupled_variants(huginn) == [] and huginn["distill_ablations"]["budget"] == "16x"
