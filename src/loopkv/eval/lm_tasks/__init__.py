"""The loopkv lm-eval tasks: one YAML template per task format in this folder, instantiated per task
with its local data file and the settings that come from the config.

A task name is `loopkv_<data>`: a real benchmark (data/benchmarks.py) or a synthetic task
(data/tasks). `task_config` gives the lm-eval config dict (functions resolved) that the Python API
takes; `write_task_yamls` writes the same configs as YAML files for lm-eval's own CLI (--include_path).
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


LM_TASKS: dict[str, LMTask] = {PREFIX + t.data: t for t in (
    *(LMTask(name, "mc.yaml", "acc") for name in ("arc_easy", "arc_challenge", "hellaswag", "piqa", "boolq",
                                                  "mmlu", "bbh", "cloze")),
    LMTask("winogrande", "mc_partial.yaml", "acc"),
    LMTask("gsm8k", "gsm8k.yaml", "exact_match"),
    LMTask("math500", "math.yaml", "exact_match"),
    LMTask("humaneval", "humaneval.yaml", "pass@1"),
    LMTask("mbpp", "mbpp.yaml", "pass@1"),
    LMTask("arithmetic", "arithmetic.yaml", "exact_match"),
    LMTask("passkey", "passkey.yaml", "accuracy"),
    LMTask("passkey_grid", "passkey.yaml", "accuracy"),      # LLA Figure 8: lengths x depths x trials
)}


def get_lm_task(name: str) -> LMTask:
    if name not in LM_TASKS:
        raise LoopKVError(f"unknown loopkv lm-eval task {name!r} (known: {', '.join(sorted(LM_TASKS))})")
    return LM_TASKS[name]


def task_name(data: str) -> str:
    return PREFIX + data


def _load_template(template: str, resolve: bool) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml

    return copy.deepcopy(load_yaml(TEMPLATES / template, resolve_func=resolve))


def task_config(name: str, data_dir, max_gen_toks: int | None = None, tokenizer=None,
                resolve: bool = True, shots: int = 0, shot_seed: int = 0, work_dir=None) -> dict:
    """lm-eval config of task `name` reading `data_dir`/test.jsonl. `max_gen_toks` overrides the
    template's generation budget; passkey derives its own from the data (key tokens + 2, as the
    direct evaluator does) and needs the tokenizer for it. With `shots`, every item's prompt starts
    with that many worked examples of other items (eval/fewshot.py), written to a data file in
    `work_dir` (which must outlive the evaluation)."""
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
        rows = with_shots(read_jsonl(data_file, "task data"), shots, shot_seed, name)
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
