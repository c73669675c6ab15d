"""The DAG: plans the right jobs, lints clean, rejects bad configs before any job runs."""
import json
from pathlib import Path

import yaml

from loopkv.config import load_config, load_workflow_config
from workflow_helpers import REPO, planned_jobs, planned_outputs, snakemake


def test_default_target_plans_data_and_teacher(workdir):
    jobs = planned_jobs(workdir)
    # Table 1 of the default config: 8 distilled codec cells, 13 evaluated cells (teacher included);
    # Table 8's rank sweep: LLA at 1.33x, 2x, 2.67x, 3.2x (4x is Table 1's cell): 4 more of each;
    # MELT: 8 recipes, 7 stage-1 jobs (no_stage2 shares the full recipe's), 7 stage-2 jobs; its
    # comparison methods sit at 4x, which Table 1 already evaluates
    assert jobs == {"corpus": 1, "tokenizer": 1, "task_data": 3, "teacher_pretrain": 1, "teacher_eval": 1,
                    "calibrate": 1, "cross_loop_structure": 1, "fig2_spectra": 1, "fig3_trajectories": 1, "distill": 12,
                    "method_eval": 18, "table1": 1, "table8": 1, "melt_stage1": 7, "melt_stage2": 7, "melt_eval": 8,
                    "distill_ablation": 9, "table10": 1,   # Table 10: the recipe and four ablations at 4x
                    "table14": 1,                          # Table 14: four decoupled-RoPE variants beside its recipe
                    # Table 9: eviction alone, over 8-bit kv_quant (its own plain cell, 2x) and over LLA 4x
                    "eviction_eval": 3, "table9": 1,
                    "melt_table": 2, "melt_vs_lla": 1, "melt_memory": 1, "fig_memory": 1,
                    # the suite: 11 benchmarks (BBH needs an sdist PyPI no longer serves); 2 models x 16
                    # shards (Table 7) + 14 passkey-grid models
                    "bench_data": 11, "lm_eval_shard": 46, "lm_eval_merge": 42, "table7": 1,
                    "passkey_grid_data": 1, "fig8": 1, "distill_on_policy": 3, "on_policy_eval": 3,
                    "table4_fig7": 1, "serve_bench": 1, "kernel_bench": 1, "table5": 1, "table13": 1, "fig10_capacity": 1,
                    "agreement": 1, "claims": 1, "all": 1,   # Table 1 vs the suite's synthetic tasks
                    # the pages of the HTML report (snakemake --report): the claims and every table
                    "claims_html": 1, **{f"{name}_html": 1 for name in HTML_TABLES}}


HTML_TABLES = ("table1", "table8", "table9", "table10", "table14", "table4", "table7", "table12", "table5", "table13", "melt_table3", "melt_table4", "melt_vs_lla")


def test_table1_cells_follow_the_config(workdir):
    # config files merge key by key, so every budget of the default is restated
    edit = {"methods": {"table1": {"4x": ["lla", "kv_quant"], "5.33x": [], "21.33x": ["lla2d"]}}}
    (workdir / "cells.yaml").write_text(yaml.safe_dump(edit))
    jobs = planned_jobs(workdir, "--configfile", "cells.yaml", "--", "reports/table1.pdf")
    assert jobs["distill"] == 2 and jobs["method_eval"] == 4 and jobs["table1"] == 1


def test_a_sampled_variant_plans_its_own_shards_beside_the_greedy_run(workdir):
    """lm_eval.tasks listing arithmetic greedy and sampled (issue 22): the variant's jobs have their own
    paths (task id arithmetic-s), and Table 7 reads both."""
    cfg = load_config({}, check_paths=False)
    tasks = [*cfg["lm_eval"]["tasks"], {"name": "arithmetic", "variant": "s", "shards": 2, "max_gen_toks": 64,
                                        "sampling": {"temperature": 1.0, "top_p": 0.7, "samples": 2}}]
    (workdir / "sampled.yaml").write_text(yaml.safe_dump({"lm_eval": {"tasks": tasks}}))
    planned = planned_outputs(workdir, "--configfile", "sampled.yaml", "--", "reports/table7.pdf")
    ours = sorted(p for p in planned if p.startswith("results/lm_eval/full/1x/arithmetic"))
    assert ours == ["results/lm_eval/full/1x/arithmetic-s.json", "results/lm_eval/full/1x/arithmetic-s/shard0of2.json",
                    "results/lm_eval/full/1x/arithmetic-s/shard1of2.json", "results/lm_eval/full/1x/arithmetic.json",
                    "results/lm_eval/full/1x/arithmetic/shard0of1.json"]


def test_an_unreachable_table_cell_is_rejected_before_any_job(workdir):
    out = _bad(workdir, {"methods": {"table1": {"5.33x": ["cla"]}}})
    assert "methods.table1.5.33x" in out and "cla cannot reach" in out


# the rules run the venv's loopkv on purpose (README, "Software on a cluster"): no conda env or
# container per rule, the one lint we accept
NO_SOFTWARE_ENV = "Specify a conda environment or container for each rule."


def test_lint_is_clean(workdir):
    proc = snakemake(workdir, "--lint", check=False)
    out = proc.stdout + proc.stderr
    lints = [line.strip()[2:].rstrip(":") for line in out.splitlines() if line.strip().startswith("* ")]
    assert lints and set(lints) == {NO_SOFTWARE_ENV}, out


def _bad(workdir, edit):
    path = workdir / "bad.yaml"
    path.write_text(yaml.safe_dump(edit))
    proc = snakemake(workdir, "-n", "--configfile", "bad.yaml", check=False)
    assert proc.returncode != 0
    assert not (workdir / "results").exists()
    return proc.stdout + proc.stderr


def test_wrong_type_is_rejected_naming_the_key(workdir):
    assert "teacher.batch_size" in _bad(workdir, {"teacher": {"batch_size": "sixteen"}})


def test_unknown_key_is_rejected_naming_the_key(workdir):
    assert "teacher.lrr" in _bad(workdir, {"teacher": {"lrr": 0.1}})


def test_missing_checkpoint_path_is_rejected_naming_the_key(workdir):
    out = _bad(workdir, {"model": {"source": "pretrained", "path": "/nonexistent/Ouro-1.4B"},
                         "data": {"tokenizer": {"kind": "pretrained", "path": "/nonexistent/Ouro-1.4B"}}})
    assert "model.path" in out


def test_paper_config_plans_without_pretraining_when_its_checkpoint_exists(workdir, reference_dir):
    config = load_config(REPO / "config/ouro-1.4b.yaml", check_paths=False)   # an overlay: merged
    checkpoint = _paper_checkpoint_config(workdir, reference_dir, config["model"]["arch"])
    config["model"]["path"] = str(checkpoint)
    config["data"]["tokenizer"]["path"] = str(checkpoint)
    (workdir / "paper.yaml").write_text(yaml.safe_dump(config))
    jobs = planned_jobs(workdir, "--configfile", "paper.yaml")
    assert "teacher_pretrain" not in jobs and jobs["teacher_eval"] == 1
    # LLA at each of the paper's ten ratios (Tables 1, 4, 7, 8, Figure 8) and mla_head at Table 1's three;
    # no LLA-2D at paper scale yet
    # method-eval: Table 1's 11 cells, Table 4's off-policy LLA at 3.2x and 10.67x, Table 8's at 1.33x, 2x, 2.67x,
    # Table 9's 8-bit kv_quant; Table 9 evaluates its three cells under eviction (sink 4 + window 256)
    assert jobs["distill"] == 13 and jobs["method_eval"] == 17 and jobs["table8"] == 1
    assert jobs["eviction_eval"] == 3 and jobs["table9"] == 1
    # Table 7's eight models (MELT's among them) x every task's shards, Table 1's seven other cells x its benchmarks' shards,
    # Figure 8's nine models x 4, Table 4's five on-policy codecs x MATH-500's shards and its off-policy
    # 10.67x (the teacher and the other off-policy codecs are Table 7 models already)
    shards = {t["name"]: t["shards"] for t in config["lm_eval"]["tasks"] if not t.get("variant")}
    table1 = sum(shards[t] for t in ("gsm8k", "arc_easy", "arc_challenge", "hellaswag", "piqa", "winogrande",
                                     "boolq", "mmlu"))
    every_task = sum(t["shards"] for t in config["lm_eval"]["tasks"])
    # + Table 8's GSM8K at 2.67x (its other ratios are Table 7 models)
    assert jobs["lm_eval_shard"] == 8 * every_task + 7 * table1 + 9 * 4 + (5 + 1) * shards["math500"] + shards["gsm8k"]
    assert jobs["melt_table1"] == 1   # MELT through lm-eval (lm_eval.models' melt/4x)
    assert jobs["distill_on_policy"] == 5 and jobs["bench_data"] >= 1   # math_train's prompts among them


def test_the_2_6b_overlay_plans_tables_2_and_11_from_lm_eval_for_every_cell(workdir, reference_dir):
    files = [REPO / "config/ouro-1.4b.yaml", REPO / "config/ouro-2.6b.yaml"]
    config = load_workflow_config(files, check_paths=False, base_dir=REPO)
    _paper_checkpoint_config(workdir, reference_dir, config["model"]["arch"], "Ouro-2.6B")
    jobs = planned_jobs(workdir, "--configfile", "config/ouro-1.4b.yaml", "config/ouro-2.6b.yaml", "--",
                        "reports/ouro-2.6b/table1.pdf")
    # ten cells: the teacher, LLA and per-head MLA at 4x / 5.33x / 10.67x, layer sharing at 4x / 6x / 12x
    assert jobs["method_eval"] == 10 and jobs["distill"] == 6 and jobs["table1"] == 1
    # each cell through GSM8K (8 shards) and the six MC tasks (11 shards)
    assert jobs["lm_eval_shard"] == 10 * 19 and "melt_stage1" not in jobs


def _paper_checkpoint_config(workdir, reference_dir, arch, name="Ouro-1.4B") -> Path:
    """A checkpoint directory holding only a config.json of `arch` (planning reads no weights)."""
    checkpoint = workdir / f"checkpoints/{name}"
    checkpoint.mkdir(parents=True)
    shipped = json.loads((reference_dir / "config.json").read_text())
    shipped.update({k: v for k, v in arch.items() if k in shipped}, vocab_size=49152)
    (checkpoint / "config.json").write_text(json.dumps(shipped))
    return checkpoint


def test_the_gpu_smoke_run_plans_one_job_of_each_stage(workdir, reference_dir):
    for name in ("gpu_smoke.yaml", "gpu_smoke_targets.txt"):
        (workdir / "benchmarks" / name).write_bytes((REPO / "benchmarks" / name).read_bytes())
    config = load_config(REPO / "config/ouro-1.4b.yaml", check_paths=False)   # an overlay: merged
    _paper_checkpoint_config(workdir, reference_dir, config["model"]["arch"])
    targets = [f"results/ouro-1.4b/{line}" for line in (REPO / "benchmarks/gpu_smoke_targets.txt").read_text().splitlines()
               if line and not line.startswith("#")]
    jobs = planned_jobs(workdir, "--configfile", "config/ouro-1.4b.yaml", "benchmarks/gpu_smoke.yaml", "--", *targets)
    assert {r: jobs.get(r) for r in ("teacher_eval", "calibrate", "distill", "method_eval", "melt_stage1",
                                     "melt_stage2", "melt_eval", "melt_memory", "distill_on_policy",
                                     "lm_eval_shard", "serve_bench", "kernel_bench")} == {
        "teacher_eval": 1, "calibrate": 1, "distill": 1, "method_eval": 2, "melt_stage1": 1, "melt_stage2": 1,
        "melt_eval": 1, "melt_memory": 1, "distill_on_policy": 1, "lm_eval_shard": 2, "serve_bench": 1,
        "kernel_bench": 1}


def test_a_checkpoint_whose_architecture_differs_from_model_arch_is_rejected(workdir, reference_dir):
    out = _bad(workdir, {"model": {"source": "pretrained", "path": str(reference_dir)},
                         "data": {"tokenizer": {"kind": "pretrained", "path": str(reference_dir)}}})
    # the default arch (D = 4, T = 4) over the fixture's config.json (D = 2, T = 3): each key named
    assert "model.arch.num_hidden_layers" in out and "model.arch.total_ut_steps" in out
    assert "data.tokenizer.vocab_size" in out


def _melt_lm_eval_config(workdir, name, tasks):
    """The default config with MELT served through lm-eval (melt/4x: T = 4) on `tasks`; without the
    on-policy and passkey-grid parts, which have nothing to do with it (a smaller DAG to build)."""
    cfg = load_config({}, check_paths=False)
    edit = {"lm_eval": {"models": [*cfg["lm_eval"]["models"], "melt/4x"], "tasks": tasks},
            "on_policy": {"budgets": []}, "passkey_grid": {"models": []}}
    (workdir / name).write_text(yaml.safe_dump(edit))
    return workdir / name


def test_melt_table1_is_planned_when_melt_runs_through_lm_eval_on_one_of_its_benchmarks(workdir):
    from inprocess_dag import _dag

    tasks = [*load_config({}, check_paths=False)["lm_eval"]["tasks"],   # math500 and humaneval among them
             {"name": "math500", "variant": "sampled", "max_docs": 16, "max_gen_toks": 96,
              "sampling": {"temperature": 1.0, "top_p": 0.7, "samples": 2}}]
    with _dag(workdir, _melt_lm_eval_config(workdir, "melt_lm.yaml", tasks)) as dag:
        jobs = {j.rule.name: j for j in dag.jobs}
        inputs = sorted(str(f) for f in jobs["melt_table1"].input)
        html = jobs["melt_table1_html"]
    # the teacher's and MELT's results on every MELT Table 1 task, not LLA's nor another task's
    assert inputs == sorted(f"results/lm_eval/{m}/{t}.json" for m in ("full/1x", "melt/4x")
                            for t in ("math500", "math500-sampled", "humaneval"))
    assert "reports/melt_table1.csv" in {str(f) for f in html.input}
    # melt served, but no task is one of MELT Table 1's benchmarks: no table
    others = [t for t in tasks if t["name"] not in ("math500", "humaneval")]
    with _dag(workdir, _melt_lm_eval_config(workdir, "melt_no_t1.yaml", others)) as dag:
        rules = {j.rule.name for j in dag.jobs}
    assert "melt_table1" not in rules and "melt_table1_html" not in rules and "lm_eval_shard" in rules
