# Config validation (schema + cross-key checks, paths included) and helpers shared by all rules.
import json
import os
import shlex
import sys

from loopkv.cache.registry import codec_methods
from loopkv.config import (DECOUPLED_METHOD, ablation_variants, decoupled_variants, eviction_cells, load_config, melt_budget_label, rank_sweep_cells,
                           table1_benchmark_tasks, workflow_file_problems)
from loopkv.data.benchmarks import BENCHMARKS, source_file as bench_source_file
from loopkv.eval.lm_tasks import split_task_id, task_id as lm_task_id
from loopkv.train.melt_recipes import final_stage, recipe_names, stage_owner, table_members
from loopkv.errors import LoopKVError
from loopkv.jobs.declared import job_spec
from loopkv.jobs.slices import job_slice

# First, before the DAG: the config Snakemake merged (config/config.yaml, then --configfile files in
# order, then --config), completed and validated, results/reports/logs dirs included, plus what its
# own parse of those files let pass (a key given twice). `loopkv config-check` runs the same code on
# the same merge (loopkv.config.load_workflow_config).
_problems = workflow_file_problems(workflow.configfiles)
try:
    _checked = load_config(dict(config))
except LoopKVError as e:
    _problems.append(str(e))
if _problems:
    raise WorkflowError("invalid config: " + "\n".join(_problems))
config.clear()
config.update(_checked)

# Rules call the `loopkv` console script; put the environment running Snakemake first on PATH so
# an un-activated venv works.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
CODEC_METHODS = codec_methods()   # the methods with a distilled codec (their classes say so)
RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = config["logs_dir"]


# DeepSpeed training jobs: ranks per job (torchrun when > 1) and the GPUs each asks the scheduler
# for. Resources, not params: they change no result, so editing them reruns nothing.
TRAIN_RANKS = config["launch"]["ranks"]
TRAIN_GPUS = config["launch"]["gpus"]
# Where every model-computing command runs (resources.device, passed as --device; utils/device.py):
# a resource like the ranks, so not in any slice; results record it in their provenance.
DEVICE = config["launch"]["device"]


# every other job that computes on a model asks for one GPU when the config trains on GPUs
MODEL_GPUS = 1 if TRAIN_GPUS > 0 else 0


def job_size(kind):
    """A job's mem_mb and runtime (launch.jobs.<kind>): the base on the first attempt, twice it on
    the first retry, and so on (the SLURM profile retries a failed job: one killed for memory or
    time comes back with more)."""
    base = config["launch"]["jobs"][kind]
    return {"mem_mb": lambda wildcards, attempt: base["mem_mb"] * attempt,
            "runtime": lambda wildcards, attempt: base["runtime"] * attempt}


# ---- from each command's declaration (loopkv.jobs), what the rules calling it pass as params and
# ask for as threads and resources. Never written by hand, so the two cannot drift apart.
def job_cfg(command, **fixed):
    """A params function: the job's config slice (its JobSpec's reads at the rule's wildcards and
    `fixed` values, e.g. MELT's budget), as JSON. Editing a key it reads reruns the job; nothing else does."""
    spec = job_spec(command)

    def cfg(wildcards):
        return json.dumps(job_slice(spec, config, {**dict(wildcards.items()), **fixed}), sort_keys=True)

    cfg.command, cfg.fixed = command, fixed   # what tests/workflow/test_declared_reruns.py reads back
    return cfg


def job_threads(command):
    """Its threads key's value; a DeepSpeed job's for every rank (the command splits them)."""
    spec = job_spec(command)
    if spec.threads is None:
        return 1
    section, key = spec.threads.split(".")
    return config[section][key] * (TRAIN_RANKS if spec.ranks else 1)


def job_resources(command):
    """mem_mb / runtime of its size, and where it computes: a DeepSpeed job asks for its ranks' GPUs
    on one node (torchrun --standalone), any other model job for one GPU when training uses GPUs."""
    spec = job_spec(command)
    resources = job_size(spec.size) if spec.size else {}
    if spec.device:
        resources.update(device=DEVICE, gpu=TRAIN_GPUS if spec.ranks else MODEL_GPUS)
    if spec.ranks:
        resources.update(ranks=TRAIN_RANKS, nodes=1)
    elif spec.size == "train":
        resources.update(nodes=1)
    return resources


# tables, merges and figures: seconds of work on small JSON files, run on the submitting host
localrules:
    all,
    cross_loop_structure,
    fig2_spectra,
    fig3_trajectories,
    fig10_capacity,
    table1,
    table8,
    table9,
    table10,
    melt_table,
    melt_vs_lla,
    fig_memory,
    lm_eval_merge,
    table7,
    fig8,
    table4_fig7,
    table5,
    table13,
    agreement,
    claims,
    teacher_depth,
    claims_html,   # and every table's page (report.smk: `localrule: True`, rules made in a loop)


def R(path):
    """A path under results/."""
    return f"{RESULTS}/{path}"


def pretrained():
    return config["model"]["source"] == "pretrained"


def teacher_dir():
    return config["model"]["path"] if pretrained() else R("teacher/model")


def tokenizer_dir():
    return config["data"]["tokenizer"]["path"] if config["data"]["tokenizer"]["kind"] == "pretrained" else R("data/tokenizer")


def flag_args(pairs):
    """A params string of `--flag value` pairs for a shell line, every value shell-quoted (paths
    come from the config's directories); the line interpolates it unquoted."""
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in pairs)


def task_args(dirs):
    """--task NAME=DIR ... for the commands that read task data."""
    return flag_args(("--task", f"{t}={d}") for t, d in dirs.items())


def parent(name):
    """A params function: the directory of the named input or output file."""

    def directory(wildcards, input, output):
        files = dict(input.items()) | dict(output.items())
        return os.path.dirname(files[name])

    return directory


TASKS = ["passkey", "arithmetic", "cloze"]
TRAIN_TASKS = [t for t in ("passkey", "arithmetic") if config["teacher"]["mixture"].get(t, 0) > 0]
CALIBRATION_TASKS = [t for t in ("passkey", "arithmetic") if config["calibration"]["mixture"].get(t, 0) > 0]


def huginn():
    return config["model"]["family"] == "huginn"


# The equal-budget table and the cross-loop figure have the paper's names for the family: LLA Table 1
# and Figure 2 on Ouro, Table 3 and Figure 4 on Huginn (the same rules and commands).
LLA_TABLE = "table3_huginn" if huginn() else "table1"
CROSS_LOOP_FIGURE = "fig4_huginn" if huginn() else "fig2_spectra"


def default_targets():
    teacher = [R("teacher/quality.json")] + ([] if pretrained() else [R("teacher/model/train_curve.json")])
    teacher += [f"{REPORTS}/teacher_depth.pdf"] if config["teacher_eval"]["loop_depths"] else []
    if huginn():   # MELT serves no Huginn layer; the serving and suite tables are Ouro's
        return teacher + [f"{REPORTS}/{CROSS_LOOP_FIGURE}.pdf", f"{REPORTS}/{LLA_TABLE}.pdf", f"{REPORTS}/claims.md"]
    melt = [f"{REPORTS}/{name}.pdf" for name in ("melt_table3", "melt_table4", "melt_vs_lla", "fig_memory_vs_length")]
    suite = [f"{REPORTS}/table7.pdf"] if LM_MODELS and LM_TASK_DATA else []
    suite += [f"{REPORTS}/melt_table1.pdf"] if melt_table1_built() else []
    suite += [f"{REPORTS}/fig8_passkey.pdf"] if config["passkey_grid"]["models"] else []
    suite += [f"{REPORTS}/table4.pdf"] if config["on_policy"]["budgets"] else []
    suite += [f"{REPORTS}/agreement.json"] if agreement_pairs() else []
    suite += [f"{REPORTS}/table8.pdf", f"{REPORTS}/fig5_rank_sweep.pdf"] if config["methods"]["rank_sweep"] else []
    suite += [f"{REPORTS}/table10.pdf", f"{REPORTS}/fig12_ablation_curves.pdf"] if DISTILL_ABLATIONS else []
    suite += [f"{REPORTS}/table9.pdf"] if EVICTION_CELLS else []
    suite += [f"{REPORTS}/table14.pdf"] if DECOUPLED_VARIANTS else []
    serving = [f"{REPORTS}/table5.pdf", f"{REPORTS}/table13.pdf"]
    serving += [f"{REPORTS}/fig10_capacity.pdf"] if config["serve"]["capacity_contexts"] else []
    claims = [f"{REPORTS}/claims.md"]
    # the pages of the HTML report: `snakemake --report` shows what the jobs of this DAG wrote
    html = [f"{REPORTS}/claims.html"] + [f"{REPORTS}/{name}.html" for name in report_tables()]
    figures = [f"{REPORTS}/{CROSS_LOOP_FIGURE}.pdf", f"{REPORTS}/fig3_trajectories.pdf"]
    return teacher + figures + [f"{REPORTS}/{LLA_TABLE}.pdf"] + melt + suite + serving + claims + html


# ---- the HTML report (`snakemake --report`): the claims page, every table's page (report.smk) and
# every figure's PNG, each with a caption (workflow/report/<name>.rst). The report lists categories
# by name: the numbers put the claims first.
REPORT_CATEGORIES = {"claims": "1. Claims", "lla": "2. LLA: quality", "serving": "3. LLA: serving",
                     "melt": "4. MELT"}


def report_tables():
    """name -> (category, heading) of every table this configuration builds: each a page of the report."""
    tables = {"table1": ("lla", "LLA Table 1: KV methods at equal cache budgets")}
    if config["teacher_eval"]["loop_depths"]:
        tables["teacher_depth"] = ("lla", "The teacher at each test-time depth")
    if config["methods"]["rank_sweep"]:
        tables["table8"] = ("lla", "LLA Table 8: the cold-start rank sweep")
    if EVICTION_CELLS:
        tables["table9"] = ("lla", "LLA Table 9: token eviction composed with KV methods")
    if DISTILL_ABLATIONS:
        tables["table10"] = ("lla", "LLA Table 10: design ablations of the recipe")
    if DECOUPLED_VARIANTS:
        tables["table14"] = ("lla", "LLA Table 14: decoupled RoPE, the absorbable path")
    if config["on_policy"]["budgets"]:
        tables["table4"] = ("lla", "LLA Table 4: off- vs on-policy distillation")
    if LM_MODELS and LM_TASK_DATA:
        tables["table7"] = ("lla", "LLA Table 7: the benchmark suite through lm-eval")
    if config["passkey_grid"]["models"]:
        tables["table12"] = ("lla", "LLA Table 12: passkey retrieval by context length")
    tables |= {"table5": ("serving", "LLA Table 5: cache bytes, capacity and decode speed"),
               "table13": ("serving", "LLA Table 13: the latent-attention kernel"),
               "melt_table3": ("melt", "MELT Table 3: gate variants"),
               "melt_table4": ("melt", "MELT Table 4: recipe components"),
               "melt_vs_lla": ("melt", "MELT beside the teacher's KV methods at MELT's budget")}
    if melt_table1_built():   # MELT served through lm-eval on one of MELT Table 1's benchmarks
        tables["melt_table1"] = ("melt", "MELT Table 1: its benchmarks through lm-eval, teacher and MELT")
    return {name: (REPORT_CATEGORIES[category], title) for name, (category, title) in tables.items()}


def claim_reports():
    """name -> file of every report this configuration builds that the claims read (loopkv.claims)."""
    if huginn():
        return {LLA_TABLE: f"{REPORTS}/{LLA_TABLE}.csv", "cross_loop_structure": R("analysis/cross_loop_structure.json")}
    reports = {name: f"{REPORTS}/{name}.csv" for name in ("table1", "melt_table3", "melt_table4", "melt_vs_lla",
                                                          "table5", "table13")}
    reports |= {"fig_memory_vs_length": f"{REPORTS}/fig_memory_vs_length.json",
                "cross_loop_structure": R("analysis/cross_loop_structure.json")}
    if LM_MODELS and LM_TASK_DATA:
        reports["table7"] = f"{REPORTS}/table7.csv"
    if config["passkey_grid"]["models"]:
        reports["fig8_passkey"] = f"{REPORTS}/fig8_passkey.json"
    if config["on_policy"]["budgets"]:
        reports["table4"] = f"{REPORTS}/table4.csv"
    if config["methods"]["rank_sweep"]:
        reports["table8"] = f"{REPORTS}/table8.csv"
    if DISTILL_ABLATIONS:
        reports["table10"] = f"{REPORTS}/table10.csv"
    if EVICTION_CELLS:
        reports["table9"] = f"{REPORTS}/table9.csv"
    if DECOUPLED_VARIANTS:
        reports["table14"] = f"{REPORTS}/table14.csv"
    return reports


# ---- KV methods at equal budgets (LLA Table 1)
DISTILL_TASKS = [t for t in ("passkey", "arithmetic") if config["distill"]["mixture"].get(t, 0) > 0]


def table1_cells():
    """(method, budget) of every Table 1 row, the teacher's full cache ("full", "1x") first."""
    cells = [("full", "1x")]
    for budget, methods in config["methods"]["table1"].items():
        cells += [(m, budget) for m in methods]
    return cells


TABLE1_BENCHMARKS = table1_benchmark_tasks(config)   # lm-eval tasks of Table 1's real-benchmark columns


def table1_benchmark_results():
    """The merged lm-eval result of every Table 1 benchmark task for every Table 1 cell."""
    return [R(f"lm_eval/{m}/{b}/{t}.json") for m, b in table1_cells() for t in TABLE1_BENCHMARKS]


def table8_benchmark_results():
    """Table 1's GSM8K task (methods.table1_benchmarks.gsm8k), Table 8's real column, for every Table 8 cell."""
    task = config["methods"]["table1_benchmarks"]["gsm8k"]
    return [R(f"lm_eval/{m}/{b}/{task}.json") for m, b in table8_cells()] if task else []


DISTILL_ABLATIONS = ablation_variants(config)   # LLA Table 10's variants, the recipe first
DECOUPLED_VARIANTS = decoupled_variants(config)  # LLA Table 14's decoupled-RoPE variants
EVICTION_CELLS = eviction_cells(config)          # LLA Table 9's (method, budget) cells


def table10_curves():
    """The distillation curve of every Table 10 variant (LLA at distill_ablations.budget), in table order."""
    budget = config["distill_ablations"]["budget"]
    return [R(f"ablations/lla/{budget}/{v}/curve.json") for v in DISTILL_ABLATIONS]


def table14_curves():
    """Table 14's rows: Table 10's recipe (full-RoPE LLA), then each decoupled-RoPE variant's curve."""
    budget = config["distill_ablations"]["budget"]
    return table10_curves()[:1] + [R(f"ablations/{DECOUPLED_METHOD}/{budget}/{v}/curve.json") for v in DECOUPLED_VARIANTS]


def table8_cells():
    """(method, budget) of Table 8's rows: the teacher's, then LLA at each methods.rank_sweep budget by ratio."""
    return [("full", "1x")] + rank_sweep_cells(config)


def agreement_pairs():
    """(Table 1 cell, lm-eval result) of every synthetic task both measure for one (method, budget)."""
    from loopkv.report.agreement import SAME_QUANTITIES

    cells = set(table1_cells())
    return [(R(f"methods/{m}/{b}/quality.json"), R(f"lm_eval/{m}/{b}/{t}.json"))
            for m, b in LM_MODELS if (m, b) in cells for t in LM_TASK_DATA if t in SAME_QUANTITIES]


def method_eval_codec(wildcards):
    """The distilled codec a method-eval job reads, for codec methods only."""
    if wildcards.method in CODEC_METHODS:
        return {"codec": R(f"distill/{wildcards.method}/{wildcards.budget}/codec.pt")}
    return {}


# ---- MELT (a model variant at its fixed budget, T x below the teacher)
MELT_TASKS = [t for t in ("passkey", "arithmetic") if config["melt"]["mixture"].get(t, 0) > 0]
MELT_BUDGET = melt_budget_label(config)
MELT_RECIPES = recipe_names(config["melt"])


def melt_stage_dir(recipe, stage):
    """The model directory of a recipe's stage, under the recipe that owns the shared job."""
    return R(f"melt/{stage_owner(config['melt'], recipe, stage)}/stage{stage}/model")


def melt_model_dir(recipe):
    return melt_stage_dir(recipe, final_stage(config["melt"], recipe))


def melt_table_recipes(which):
    """Recipe names of MELT Table 3 or 4, in table order."""
    return table_members(config["melt"], int(which))


MEMORY_CODECS = [m for m in config["melt"]["memory_methods"] if m in CODEC_METHODS]


# ---- the evaluation suite through lm-eval (model "loopkv"), LLA Table 7
LM_MODELS = [os.path.split(pair) for pair in config["lm_eval"]["models"]]   # "lla/4x" -> ("lla", "4x")
# by task id: an entry's name, or name-variant for a second way of running it (lm_tasks.task_id)
LM_TASKS = {lm_task_id(t["name"], t.get("variant")): t for t in config["lm_eval"]["tasks"]}
LM_TASK_DATA = list(LM_TASKS)   # the task ids (wildcard {task} of the lm-eval rules)


# MELT Table 1 (lm_eval.smk): the lm-eval task ids that run one of its benchmarks; in the default target
# when lm_eval.models serves melt and lm_eval.tasks runs one of them
def melt_table1_tasks():
    from loopkv.report.paper_values import MELT_TABLE1

    return [t for t in LM_TASK_DATA if split_task_id(t)[0] in MELT_TABLE1]


def melt_table1_built():
    return bool(melt_table1_tasks()) and any(m == "melt" for m, _ in LM_MODELS)


def melt_table1_results(wildcards):
    """The merged lm-eval results of full/1x and melt/<its budget> (those lm_eval.models serves) on melt_table1_tasks()."""
    files = [R(f"lm_eval/{m}/{b}/{t}.json") for m, b in LM_MODELS if m in ("full", "melt") for t in melt_table1_tasks()]
    if not files:
        raise WorkflowError(f"{REPORTS}/melt_table1.pdf reads the teacher's and MELT's lm-eval results on MELT "
                            f"Table 1's benchmarks: lm_eval.tasks runs none of them, or lm_eval.models serves "
                            f"neither full/1x nor melt")
    return files


BENCHMARK_NAMES = sorted(BENCHMARKS)


GRID_MODELS = [os.path.split(pair) for pair in config["passkey_grid"]["models"]]


def lm_task_data(task):
    """The data directory a loopkv lm-eval task (id) reads: a real benchmark, the passkey grid, or a synthetic task."""
    task = split_task_id(task)[0]
    if task == "passkey_grid":
        return R("data/passkey_grid")
    return R(f"data/bench/{task}") if task in BENCHMARKS else R(f"data/tasks/{task}")


def local_bench_file(wildcards):
    """The file a benchmark's config key names (data.local_benchmarks.<bench>, or data.bigbench_sdist for
    BBH's two; the config check has found it): the input of its data job, so a changed file reruns it and
    every evaluation reading it."""
    path = bench_source_file(config, wildcards.bench)
    if path is None:
        raise WorkflowError(f"{R(f'data/bench/{wildcards.bench}')} is read from the file that config key "
                            f"'{BENCHMARKS[wildcards.bench].source_key}' names, which is not set: set it to its path")
    return path


def lm_task_settings(task):
    """How a task runs: its lm_eval.tasks entry; the passkey grid always runs whole."""
    if task == "passkey_grid":
        return {"name": task, "shards": config["passkey_grid"]["shards"]}
    return LM_TASKS[task]


def lm_shards(task):
    return lm_task_settings(task).get("shards", 1)


# where a served model's lm-eval results live: lm_eval/ (as built: a codec method's off-policy codec),
# lm_eval_on_policy/ (a codec method's on-policy codec, for Table 4 on a benchmark)
SERVED_CODECS = {"lm_eval": "distill", "lm_eval_on_policy": "on_policy"}
SERVED_PATTERN = "|".join(SERVED_CODECS)


def lm_shard_files(method, budget, task, served="lm_eval"):
    n = lm_shards(task)
    return [R(f"{served}/{method}/{budget}/{task}/shard{i}of{n}.json") for i in range(n)]


def lm_model_inputs(wildcards):
    """What serves a (method, budget): the teacher, plus a codec (off- or on-policy) or a MELT model."""
    files = {"teacher": f"{teacher_dir()}/config.json"}
    if wildcards.method in CODEC_METHODS:
        files["codec"] = R(f"{SERVED_CODECS[wildcards.served]}/{wildcards.method}/{wildcards.budget}/codec.pt")
    elif wildcards.served != "lm_eval":
        raise ValueError(f"{wildcards.served}/{wildcards.method}: only a codec method has an on-policy codec")
    if wildcards.method == "melt":
        files["student"] = f"{melt_model_dir('full')}/config.json"
    return files


def lm_model_args(wildcards, input):
    return flag_args((f"--{name}", os.path.dirname(input[name]) if name != "codec" else input[name])
                     for name in ("codec", "student") if name in input.keys())


# ---- on-policy distillation (LLA Eq. 6-7), Table 4 and Figure 7
ON_POLICY_METHOD = config["on_policy"]["method"]
ON_POLICY_BUDGETS = config["on_policy"]["budgets"]
ON_POLICY_BENCHMARK = config["on_policy"]["benchmark"]   # an lm_eval.tasks id, or None: the arithmetic chains


def on_policy_prompt_files():
    """{set: the data job's output it waits for}: a synthetic task's manifest (its train.jsonl is beside
    it), or a benchmark's rows (math_train: MATH less MATH-500); the job reads the directory."""
    return {t: R(f"data/bench/{t}/test.jsonl") if t in BENCHMARKS else R(f"data/tasks/{t}/manifest.json")
            for t in config["on_policy"]["prompts"]}


def table4_benchmark_results():
    """Table 4 / Figure 7 on a benchmark: its lm-eval results of the teacher, then off- and on-policy
    codecs per budget ({} when it runs on the arithmetic chains)."""
    if ON_POLICY_BENCHMARK is None:
        return {}
    t, m = ON_POLICY_BENCHMARK, ON_POLICY_METHOD
    return {"bench_teacher": R(f"lm_eval/full/1x/{t}.json"),
            "bench_off": [R(f"lm_eval/{m}/{b}/{t}.json") for b in ON_POLICY_BUDGETS],
            "bench_on": [R(f"lm_eval_on_policy/{m}/{b}/{t}.json") for b in ON_POLICY_BUDGETS],
            "tokenizer": f"{teacher_dir()}/config.json"}   # its tokenizer counts the generated tokens
