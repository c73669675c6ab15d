# Config validation (schema + cross-key checks, paths included) and helpers shared by all rules.
import json
import sys

from loopkv.config import config_slice, load_config
from loopkv.errors import LoopKVError

try:
    _checked = load_config(dict(config))
except LoopKVError as e:
    raise WorkflowError(f"invalid config: {e}") from None
config.clear()
config.update(_checked)

# Rules call the package through the interpreter running Snakemake, so an un-activated venv works.
LOOPKV = f"{sys.executable} -m loopkv"
RESULTS = config["results_dir"]
LOGS = "logs"


def R(path):
    """A path under results/."""
    return f"{RESULTS}/{path}"


def cfg_json(*dotted_keys):
    """The config slice a rule uses, as JSON: passed as params, so editing any other key does not
    rerun the rule, and editing one of these does. One key: that section itself; several: a dict
    keyed by each key's last part (e.g. {"teacher": ..., "model": ...})."""
    sections = {key.split(".")[-1]: config_slice(config, key)[key] for key in dotted_keys}
    only = next(iter(sections.values())) if len(sections) == 1 else sections
    return json.dumps(only, sort_keys=True)


def pretrained():
    return config["model"]["source"] == "pretrained"


def teacher_dir():
    return config["model"]["path"] if pretrained() else R("teacher/model")


def tokenizer_dir():
    return config["data"]["tokenizer"]["path"] if config["data"]["tokenizer"]["kind"] == "pretrained" else R("data/tokenizer")


TASKS = ["passkey", "arithmetic", "cloze"]
TRAIN_TASKS = [t for t in ("passkey", "arithmetic") if config["teacher"]["mixture"].get(t, 0) > 0]


def default_targets():
    return [R("teacher/quality.json")] + ([] if pretrained() else [R("teacher/model/train_curve.json")])
