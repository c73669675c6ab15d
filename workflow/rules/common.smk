# Config validation (schema + cross-key checks, paths included) and helpers shared by all rules.
import json
import os
import sys

from loopkv.cache.settings import CODEC_METHODS, READ_PATH_METHODS
from loopkv.config import config_slice, load_config
from loopkv.errors import LoopKVError

try:
    _checked = load_config(dict(config))
except LoopKVError as e:
    raise WorkflowError(f"invalid config: {e}") from None
config.clear()
config.update(_checked)

# Rules call the `loopkv` console script; put the environment running Snakemake first on PATH so
# an un-activated venv works (a rule's conda env, when used, is activated in front of it).
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = config["logs_dir"]


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


def task_args(dirs):
    """--task NAME=DIR ... for the commands that read task data."""
    return " ".join(f"--task {t}={d}" for t, d in dirs.items())


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
    return teacher + [f"{REPORTS}/fig2_spectra.pdf", f"{REPORTS}/table1.pdf"]


# ---- KV methods at equal budgets (LLA Table 1)
DISTILL_TASKS = [t for t in ("passkey", "arithmetic") if config["distill"]["mixture"].get(t, 0) > 0]


def table1_cells():
    """(method, budget) of every Table 1 row, the teacher's full cache ("full", "1x") first."""
    cells = [("full", "1x")]
    for budget, methods in config["methods"]["table1"].items():
        cells += [(m, budget) for m in methods]
    return cells


def cell_cfg(section, wildcards):
    """A cell job's config slice: its own section, the one budget it runs at, the read path if its
    method has one, the model dtype. Editing another cell's settings leaves this job alone."""
    methods, budget = config["methods"], wildcards.budget
    budgets = {} if budget == "1x" else {budget: methods["budgets"][budget]}
    sliced = {"cache_dtype": methods["cache_dtype"], "k_share": methods["k_share"], "budgets": budgets}
    if section == "method_eval" and wildcards.method in READ_PATH_METHODS:
        sliced["read_path"] = methods["read_path"]
    # threads reach the job through the rule's `threads`, not the slice: they change no result
    own = {k: v for k, v in config[section].items() if k != "threads"}
    return json.dumps({section: own, "methods": sliced, "model": {"dtype": config["model"]["dtype"]}},
                      sort_keys=True)


def method_eval_codec(wildcards):
    """The distilled codec a method-eval job reads, for codec methods only."""
    if wildcards.method in CODEC_METHODS:
        return {"codec": R(f"distill/{wildcards.method}/{wildcards.budget}/codec.pt")}
    return {}
