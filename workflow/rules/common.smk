# Config validation (schema + cross-key checks, paths included) and helpers shared by all rules.
import json
import os
import shlex
import sys
from types import SimpleNamespace

from loopkv.cache.settings import CODEC_METHODS, READ_PATH_METHODS
from loopkv.config import config_slice, load_config, melt_budget_label, workflow_file_problems
from loopkv.data.benchmarks import BENCHMARKS
from loopkv.train.melt_recipes import final_stage, recipe, recipe_names, stage_cfg, stage_owner, table_members
from loopkv.errors import LoopKVError
from loopkv.serve.bench import bench_slice, kernel_slice

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


# tables, merges and figures: seconds of work on small JSON files, run on the submitting host
localrules:
    all,
    cross_loop_structure,
    fig2_spectra,
    table1,
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


def R(path):
    """A path under results/."""
    return f"{RESULTS}/{path}"


def cfg_json(*dotted_keys):
    """The config slice a job uses, as JSON. Passed as params, so editing one of these keys reruns
    the job and editing any other key does not. For one key the section itself; for several, a
    dict keyed by each key's last part (e.g. {"teacher": ..., "model": ...})."""
    sections = {key.split(".")[-1]: config_slice(config, key)[key] for key in dotted_keys}
    only = next(iter(sections.values())) if len(sections) == 1 else sections
    return json.dumps(only, sort_keys=True)


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


def default_targets():
    teacher = [R("teacher/quality.json")] + ([] if pretrained() else [R("teacher/model/train_curve.json")])
    melt = [f"{REPORTS}/{name}.pdf" for name in ("melt_table3", "melt_table4", "melt_vs_lla", "fig_memory_vs_length")]
    suite = [f"{REPORTS}/table7.pdf"] if LM_MODELS and LM_TASK_DATA else []
    suite += [f"{REPORTS}/fig8_passkey.pdf"] if config["passkey_grid"]["models"] else []
    suite += [f"{REPORTS}/table4.pdf"] if config["on_policy"]["budgets"] else []
    suite += [f"{REPORTS}/agreement.json"] if agreement_pairs() else []
    serving = [f"{REPORTS}/table5.pdf", f"{REPORTS}/table13.pdf"]
    return teacher + [f"{REPORTS}/fig2_spectra.pdf", f"{REPORTS}/table1.pdf"] + melt + suite + serving


# ---- KV methods at equal budgets (LLA Table 1)
DISTILL_TASKS = [t for t in ("passkey", "arithmetic") if config["distill"]["mixture"].get(t, 0) > 0]


def table1_cells():
    """(method, budget) of every Table 1 row, the teacher's full cache ("full", "1x") first."""
    cells = [("full", "1x")]
    for budget, methods in config["methods"]["table1"].items():
        cells += [(m, budget) for m in methods]
    return cells


def agreement_pairs():
    """(Table 1 cell, lm-eval result) of every synthetic task both measure for one (method, budget)."""
    from loopkv.report.agreement import SAME_QUANTITIES

    cells = set(table1_cells())
    return [(R(f"methods/{m}/{b}/quality.json"), R(f"lm_eval/{m}/{b}/{t}.json"))
            for m, b in LM_MODELS if (m, b) in cells for t in LM_TASK_DATA if t in SAME_QUANTITIES]


def methods_slice(method, budget, served=True):
    """The `methods` keys a job of one (method, budget) reads: the one budget it runs at, and the
    read path when it serves (evaluates) a method that has read paths."""
    methods = config["methods"]
    budgets = {} if budget == "1x" else {budget: methods["budgets"][budget]}
    sliced = {"cache_dtype": methods["cache_dtype"], "k_share": methods["k_share"], "budgets": budgets}
    if served and method in READ_PATH_METHODS:
        sliced["read_path"] = methods["read_path"]
    if method == "kv_quant":
        sliced["kv_quant_group"] = methods["kv_quant_group"]
    return sliced


def cell_cfg(section, wildcards):
    """A cell job's config slice: its own section, the one budget it runs at, the read path if its
    method has one, the model dtype. Editing another cell's settings leaves this job alone."""
    sliced = methods_slice(wildcards.method, wildcards.budget, served=section == "method_eval")
    # threads reach the job through the rule's `threads`, not the slice: they change no result
    own = {k: v for k, v in config[section].items() if k != "threads"}
    return json.dumps({section: own, "methods": sliced, "model": {"dtype": config["model"]["dtype"]}},
                      sort_keys=True)


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


def melt_stage_cfg(recipe, stage):
    return json.dumps({"melt": stage_cfg(config["melt"], recipe, stage), "model": {"dtype": config["model"]["dtype"]}},
                      sort_keys=True)


def melt_table_recipes(which):
    """Recipe name -> recipe keys of MELT Table 3 or 4, in table order (ema_decay only where the
    ema gate reads it, so editing it redraws only the table that has that recipe)."""
    recipes = {n: recipe(config["melt"], n) for n in table_members(config["melt"], int(which))}
    return {n: {k: v for k, v in r.items() if k != "ema_decay" or r["gate"] == "ema"} for n, r in recipes.items()}


MEMORY_CODECS = [m for m in config["melt"]["memory_methods"] if m in CODEC_METHODS]


def melt_eval_cfg():
    """The method_eval slice of a MELT recipe's evaluation, batched at melt.eval_batch_size."""
    sliced = json.loads(cell_cfg("method_eval", SimpleNamespace(method="melt", budget=MELT_BUDGET)))
    sliced["method_eval"]["batch_size"] = config["melt"]["eval_batch_size"]
    return json.dumps(sliced, sort_keys=True)


# ---- the evaluation suite through lm-eval (model "loopkv"), LLA Table 7
LM_MODELS = [os.path.split(pair) for pair in config["lm_eval"]["models"]]   # "lla/4x" -> ("lla", "4x")
LM_TASKS = {t["name"]: t for t in config["lm_eval"]["tasks"]}
LM_TASK_DATA = list(LM_TASKS)
BENCHMARK_NAMES = sorted(BENCHMARKS)


GRID_MODELS = [os.path.split(pair) for pair in config["passkey_grid"]["models"]]


def lm_task_data(task):
    """The data directory a loopkv lm-eval task reads: a real benchmark, the passkey grid, or a synthetic task."""
    if task == "passkey_grid":
        return R("data/passkey_grid")
    return R(f"data/bench/{task}") if task in BENCHMARKS else R(f"data/tasks/{task}")


def lm_task_settings(task):
    """How a task runs: its lm_eval.tasks entry; the passkey grid always runs whole."""
    if task == "passkey_grid":
        return {"name": task, "shards": config["passkey_grid"]["shards"]}
    return LM_TASKS[task]


def lm_shards(task):
    return lm_task_settings(task).get("shards", 1)


def lm_shard_files(method, budget, task):
    n = lm_shards(task)
    return [R(f"lm_eval/{method}/{budget}/{task}/shard{i}of{n}.json") for i in range(n)]


def lm_model_inputs(wildcards):
    """What serves a (method, budget): the teacher, plus a codec or a MELT model."""
    files = {"teacher": f"{teacher_dir()}/config.json"}
    if wildcards.method in CODEC_METHODS:
        files["codec"] = R(f"distill/{wildcards.method}/{wildcards.budget}/codec.pt")
    if wildcards.method == "melt":
        files["student"] = f"{melt_model_dir('full')}/config.json"
    return files


def lm_shard_cfg(wildcards):
    """A shard job's slice: the one task's settings (its shard count is in the file name), batch
    size, the served method's keys, the model dtype."""
    # None = the task's own default: left out, so stating it explicitly changes nothing
    task = {k: v for k, v in lm_task_settings(wildcards.task).items() if k not in ("shards", "name") and v is not None}
    return json.dumps({"lm_eval": {"batch_size": config["lm_eval"]["batch_size"], "tasks": {wildcards.task: task}},
                       "methods": methods_slice(wildcards.method, wildcards.budget),
                       "model": {"dtype": config["model"]["dtype"]}}, sort_keys=True)


def lm_model_args(wildcards, input):
    return flag_args((f"--{name}", os.path.dirname(input[name]) if name != "codec" else input[name])
                     for name in ("codec", "student") if name in input.keys())


# ---- on-policy distillation (LLA Eq. 6-7), Table 4 and Figure 7
ON_POLICY_METHOD = config["on_policy"]["method"]
ON_POLICY_BUDGETS = config["on_policy"]["budgets"]


def on_policy_cfg(wildcards):
    """An on-policy job's slice: its section (threads and the report's bin width aside), its one budget."""
    own = {k: v for k, v in config["on_policy"].items() if k not in ("threads", "exposure_bin_tokens", "budgets")}
    return json.dumps({"on_policy": own, "methods": methods_slice(wildcards.method, wildcards.budget, served=False),
                       "model": {"dtype": config["model"]["dtype"]}}, sort_keys=True)


# ---- serving benchmarks (LLA Table 5 / 13): random-weight models of the configured architecture
def serve_cfg():
    return json.dumps(bench_slice(config), sort_keys=True)


def kernel_cfg():
    return json.dumps(kernel_slice(config), sort_keys=True)
