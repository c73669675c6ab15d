"""The loopkv lm-eval tasks: one YAML template per task format in this folder, instantiated per task
with its local data file and the settings that come from the config.

A task name is `loopkv_<data>`: a real benchmark (data/benchmarks.py) or a synthetic task
(data/tasks). `task_config` gives the lm-eval config dict (functions resolved) that the Python API
takes; `write_task_yamls` writes the same configs as YAML files for lm-eval's own CLI (--include_path).

One benchmark may run more than one way (an lm_eval.tasks entry's `variant`, e.g. greedy and
sampled): its task id, in result paths, wildcards and table columns, is `<data>` or `<data>-<variant>`
(data names hold underscores, never a hyphen; a variant is [a-z0-9]+).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import yaml

from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import iter_jsonl

TEMPLATES = Path(__file__).parent
PREFIX = "loopkv_"


@dataclass(frozen=True)
class LMTask:
    data: str            # the benchmark or synthetic task whose test.jsonl the task reads
    template: str        # YAML template in this folder
    metric: str          # the headline metric (what tables report)
    # a row field, the item's group (BBH's subtask): its few-shot examples come from its own group, and
    # an entry's max_docs_per_group samples each group
    shot_group: str | None = None

    @property
    def generative(self) -> bool:
        """A generate_until task (the model writes its answer); the others are scored by log-likelihood."""
        return self.template not in ("mc.yaml", "mc_partial.yaml")


LM_TASKS: dict[str, LMTask] = {PREFIX + t.data: t for t in (
    *(LMTask(name, "mc.yaml", "acc") for name in ("arc_easy", "arc_challenge", "hellaswag", "piqa", "boolq",
                                                  "mmlu", "bbh", "cloze")),
    LMTask("winogrande", "mc_partial.yaml", "acc"),
    LMTask("gsm8k", "gsm8k.yaml", "exact_match"),
    LMTask("math500", "math.yaml", "exact_match"),
    LMTask("bbh_gen", "bbh_gen.yaml", "exact_match", shot_group="subtask"),   # BBH's generated exact match
    LMTask("humaneval", "humaneval.yaml", "pass@1"),
    LMTask("mbpp", "mbpp.yaml", "pass@1"),
    LMTask("arithmetic", "arithmetic.yaml", "exact_match"),
    LMTask("passkey", "passkey.yaml", "accuracy"),
    LMTask("passkey_grid", "passkey.yaml", "accuracy"),      # LLA Figure 8: lengths x depths x trials
    # read from the user's files (data.local_benchmarks): MELT Table 1's benchmarks and EvalPlus's
    *(LMTask(name, "math.yaml", "exact_match") for name in ("aime24", "aime25", "aime26", "amc23",
                                                           "olympiadbench", "hle")),
    *(LMTask(name, "mc.yaml", "acc") for name in ("gpqa", "mmlu_redux")),
    LMTask("humaneval_plus", "humaneval_plus.yaml", "pass@1"),   # pass@1 = base inputs, pass@1_plus beside it
    LMTask("mbpp_plus", "mbpp_plus.yaml", "pass@1"),
)}


def get_lm_task(name: str) -> LMTask:
    if name not in LM_TASKS:
        raise LoopKVError(f"unknown loopkv lm-eval task {name!r} (known: {', '.join(sorted(LM_TASKS))})")
    return LM_TASKS[name]


def task_name(data: str) -> str:
    return PREFIX + data


VARIANT_SEPARATOR = "-"


def task_id(data: str, variant: str | None = None) -> str:
    """The id of one way of running a benchmark: `data`, or `data-variant`."""
    return data if not variant else f"{data}{VARIANT_SEPARATOR}{variant}"


def split_task_id(tid: str) -> tuple[str, str | None]:
    """(data, variant or None) of a task id (a leading `loopkv_` is dropped)."""
    data, _, variant = tid.removeprefix(PREFIX).partition(VARIANT_SEPARATOR)
    return data, variant or None


GREEDY = {"strategy": "greedy"}
LOGLIKELIHOOD = {"strategy": "loglikelihood"}


def decoding(cfg: dict) -> dict:
    """How a task config's outputs are produced: greedy, sampled (its settings and samples per
    document) or, for a multiple-choice task, scored by log-likelihood."""
    if cfg["output_type"] != "generate_until":
        return dict(LOGLIKELIHOOD)
    kwargs = cfg.get("generation_kwargs") or {}
    if not kwargs.get("do_sample"):
        return dict(GREEDY)
    return {"strategy": "sampling", "temperature": float(kwargs["temperature"]), "top_p": float(kwargs["top_p"]),
            "samples": int(cfg.get("repeats") or 1), "seed": int(kwargs["seed"])}


def _sampled(cfg: dict, sampling: dict) -> None:
    """Make `cfg` draw `samples` generations per document (lm-eval's `repeats`) with the model's seeded
    nucleus sampling, each scored on its own: one lm-eval filter per sample (`sample<k>` keeps the k-th
    response), so every metric is computed per sample and run_task averages them per document."""
    from loopkv.eval.lm_tasks.filters import NTH_RESPONSE

    if cfg["output_type"] != "generate_until":
        raise LoopKVError(f"task {cfg['task']} is scored by log-likelihood: only generation tasks can sample")
    if sampling.get("seed") is None:
        raise LoopKVError(f"task {cfg['task']}: sampling needs a seed")
    n = int(sampling["samples"])
    cfg["generation_kwargs"].update(do_sample=True, temperature=float(sampling["temperature"]),
                                    top_p=float(sampling["top_p"]), seed=int(sampling["seed"]))
    cfg["repeats"] = n
    cfg["filter_list"] = [{"name": sample_filter(k), "filter": [{"function": NTH_RESPONSE, "index": k}]}
                          for k in range(n)]


def sample_filter(k: int) -> str:
    return f"sample{k}"


def _load_template(template: str, resolve: bool) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml

    return copy.deepcopy(load_yaml(TEMPLATES / template, resolve_func=resolve))


def task_config(name: str, data_dir, max_gen_toks: int | None = None, tokenizer=None,
                resolve: bool = True, shots: int = 0, shot_seed: int = 0, work_dir=None,
                sampling: dict | None = None) -> dict:
    """lm-eval config of task `name` reading `data_dir`/test.jsonl. `max_gen_toks` overrides the
    template's generation budget; passkey derives its own from the data (key tokens + 2, as the
    direct evaluator does) and needs the tokenizer for it. With `shots`, every item's prompt starts
    with that many worked examples of other items (eval/fewshot.py; of its own group, e.g. BBH's
    subtask, for a task with a `shot_group`), written to a data file in `work_dir` (which must
    outlive the evaluation). With `sampling` ({temperature, top_p, samples,
    seed}: an lm_eval.tasks entry's, its seed resolved) a generation task samples instead of
    decoding greedily (see _sampled)."""
    task = get_lm_task(name)
    data_file = Path(data_dir, "test.jsonl").resolve()
    if not data_file.is_file():
        raise LoopKVError(f"task {name}: no data at {data_file} (build it with `loopkv data-bench` / `data-task`)")
    cfg = _load_template(task.template, resolve)
    cfg["task"] = name
    if shots:
        from loopkv.eval.fewshot import with_shots
        from loopkv.utils.atomic import read_jsonl, write_jsonl

        if work_dir is None:
            raise LoopKVError(f"task {name}: few-shot prompts need a work directory for their data file")
        rows = with_shots(read_jsonl(data_file, "task data"), shots, shot_seed, name, group=task.shot_group)
        data_file = Path(work_dir, f"{name}-{shots}shot.jsonl").resolve()
        write_jsonl(data_file, rows)
    cfg["dataset_kwargs"] = {"data_files": {"test": str(data_file)}}
    if task.template == "passkey.yaml":
        if tokenizer is None:
            raise LoopKVError(f"task {name} needs the tokenizer to size its generation budget")
        rows = iter_jsonl(data_file, "task data", {"target": str})
        first = next(rows, None)
        rows.close()
        if first is None:
            raise LoopKVError(f"task {name}: {data_file} holds no rows")
        max_gen_toks = len(tokenizer.encode(first["target"], add_special_tokens=False)) + 2
    if max_gen_toks is not None and "generation_kwargs" in cfg:
        cfg["generation_kwargs"]["max_gen_toks"] = int(max_gen_toks)
    if sampling:
        _sampled(cfg, sampling)
    return cfg


class _FunctionTag(str):
    """A `!function module.name` reference, dumped back as the tag lm-eval's loader reads."""


class _TaskDumper(yaml.SafeDumper):
    pass


_TaskDumper.add_representer(_FunctionTag, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def write_task_yamls(out_dir, configs: list[dict]) -> Path:
    """YAML files of unresolved task configs (`task_config(..., resolve=False)`) for --include_path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for cfg in configs:
        cfg = dict(cfg)
        if isinstance(cfg.get("process_results"), str):
            # the unresolved loader prefixes the YAML's folder; our functions are importable by module path
            cfg["process_results"] = _FunctionTag(Path(cfg["process_results"]).name)
        (out_dir / f"{cfg['task']}.yaml").write_text(yaml.dump(cfg, Dumper=_TaskDumper, sort_keys=False))
    return out_dir
