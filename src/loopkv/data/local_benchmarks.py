"""Benchmarks read from a file the user gives: MELT Table 1's (AIME 24 / 25 / 26, AMC23, OlympiadBench,
HLE, GPQA, MMLU-Redux) and EvalPlus's HumanEval+ / MBPP+, which no package ships offline. The config
names each file (`data.local_benchmarks.<name>`: a path, or null when not used); the data job reads it
into the row formats the loopkv lm-eval tasks read (data/benchmarks.py), and the config check reads it
too, so a malformed file is reported before any job starts.

One JSON Lines format per kind (one JSON object a line, blank lines skipped, `.gz` read as gzip;
fields besides those below are ignored, so a dataset export with more columns works as it is):

- math answer (aime24, aime25, aime26, amc23, olympiadbench, hle): {"problem": text, "answer": text or
  number}, optional "id" (text or integer). Prompted like MATH-500, scored by math-verify against
  `answer` (math.yaml).
- multiple choice (gpqa, mmlu_redux): {"question": text, "choices": [4 texts], "answer": the correct
  choice as a 0-based index or a letter "A"-"D"}, optional "subject" (text; MMLU's header names it)
  and "id". Scored by log-likelihood of the answer letter (mc.yaml).
- EvalPlus (humaneval_plus, mbpp_plus): EvalPlus's own released rows (HumanEvalPlus / MbppPlus
  .jsonl[.gz]): "task_id", "prompt", "entry_point", "canonical_solution", "base_input" and
  "plus_input" (lists of argument lists) and "atol" (a tolerance >= 0 for float outputs). The model
  completes the prompt; its program and the canonical solution run on the same inputs in the
  sandbox only (eval/code_exec.py), never in this process.

Every row is checked (required fields, types, non-empty text, an answer index in range, a repeated
id); an error names the config key, the file, the line and the field. The file's contents are data:
only the EvalPlus code fields ever run, and only inside the sandbox; nothing from the file reaches a
shell or this process's interpreter.
"""
from __future__ import annotations

import gzip
import json
import keyword
import math
import os
from dataclasses import dataclass
from pathlib import Path

from loopkv.errors import LoopKVError

CONFIG_SECTION = "data.local_benchmarks"
FORMATS = ("math_answer", "multiple_choice", "evalplus")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class LocalBenchmark:
    name: str
    format: str                 # one of FORMATS
    title: str                  # how tables name it
    choices: int | None = None  # multiple choice: the options every row has
    protocol: str | None = None  # evalplus: humaneval or mbpp (its prompt and stop strings)

    @property
    def config_key(self) -> str:
        return f"{CONFIG_SECTION}.{self.name}"


LOCAL_BENCHMARKS: dict[str, LocalBenchmark] = {b.name: b for b in (
    LocalBenchmark("aime24", "math_answer", "AIME24"),
    LocalBenchmark("aime25", "math_answer", "AIME25"),
    LocalBenchmark("aime26", "math_answer", "AIME26"),
    LocalBenchmark("amc23", "math_answer", "AMC23"),
    LocalBenchmark("olympiadbench", "math_answer", "OlympiadBench"),
    LocalBenchmark("hle", "math_answer", "HLE"),
    LocalBenchmark("gpqa", "multiple_choice", "GPQA", choices=4),
    LocalBenchmark("mmlu_redux", "multiple_choice", "MMLU-Redux", choices=4),
    LocalBenchmark("humaneval_plus", "evalplus", "HumanEval+", protocol="humaneval"),
    LocalBenchmark("mbpp_plus", "evalplus", "MBPP+", protocol="mbpp"),
)}
# the benchmark kind (data/benchmarks.py) of each format's rows
KINDS = {"math_answer": "math", "multiple_choice": "mc", "evalplus": "code"}


class _RowError(Exception):
    """What is wrong with the file (its path, line and field), without the config key."""


def get_local_benchmark(name: str) -> LocalBenchmark:
    if name not in LOCAL_BENCHMARKS:
        raise LoopKVError(f"{name!r} is not a benchmark read from a local file "
                          f"(those are: {', '.join(LOCAL_BENCHMARKS)})")
    return LOCAL_BENCHMARKS[name]


def read_local(name: str, path: str | os.PathLike) -> list[dict]:
    """The file's rows in the benchmark's row format (without the `id` that Benchmark.read assigns;
    a row's own id, if any, as `source_id`). Raises LoopKVError naming the config key, file, line, field."""
    bench = get_local_benchmark(name)
    try:
        return _read(bench, Path(path))
    except _RowError as e:
        raise LoopKVError(f"config key '{bench.config_key}': {e}") from None


def file_problem(name: str, path: str | os.PathLike) -> str | None:
    """What is wrong with the file (for the config check, which names the key itself), or None."""
    try:
        _read(get_local_benchmark(name), Path(path))
    except _RowError as e:
        return str(e)
    return None


# ---------------------------------------------------------------- reading


def _lines(path: Path):
    """(line number, parsed object) of every non-blank line."""
    try:
        f = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except FileNotFoundError:
        raise _RowError(f"the file {path} does not exist") from None
    except IsADirectoryError:
        raise _RowError(f"{path} is a directory, not a JSONL file") from None
    except OSError as e:
        raise _RowError(f"the file {path} cannot be read ({e.strerror or e})") from None
    line_no = 0
    try:
        with f:
            for line_no, raw in enumerate(f, 1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise _RowError(f"{path} line {line_no}: not UTF-8 text (byte {e.start})") from None
                if not text.strip():
                    continue
                try:
                    yield line_no, json.loads(text)
                except json.JSONDecodeError as e:
                    raise _RowError(f"{path} line {line_no}: not a JSON object ({e.msg} at column {e.colno}); "
                                    f"the format is one JSON object a line (JSON Lines)") from None
                except RecursionError:
                    raise _RowError(f"{path} line {line_no}: JSON nested too deeply to read") from None
    except (EOFError, gzip.BadGzipFile) as e:
        raise _RowError(f"{path} line {line_no + 1}: corrupt or truncated gzip data ({e})") from None
    except OSError as e:
        raise _RowError(f"the file {path} cannot be read ({e.strerror or e})") from None


def _read(bench: LocalBenchmark, path: Path) -> list[dict]:
    normalise = {"math_answer": _math_answer, "multiple_choice": _multiple_choice, "evalplus": _evalplus}[bench.format]
    rows, seen = [], {}
    id_field = "task_id" if bench.format == "evalplus" else "id"
    for line_no, obj in _lines(path):
        where = f"{path} line {line_no}"
        if not isinstance(obj, dict):
            raise _RowError(f"{where}: is {_kind(obj)}, expected a JSON object ({_expected(bench)})")
        row = normalise(bench, obj, where)
        source_id = row.get("source_id")
        if source_id is not None:
            if source_id in seen:
                raise _RowError(f"{where}: field '{id_field}' is {source_id!r}, as on line {seen[source_id]}: "
                                f"every row needs an id of its own")
            seen[source_id] = line_no
        rows.append(row)
    if not rows:
        raise _RowError(f"{path} holds no rows (expected one JSON object a line: {_expected(bench)})")
    return rows


def _expected(bench: LocalBenchmark) -> str:
    return {"math_answer": "fields problem and answer",
            "multiple_choice": f"fields question, choices ({bench.choices} texts) and answer (an index or a letter)",
            "evalplus": "EvalPlus's fields task_id, prompt, entry_point, canonical_solution, base_input, "
                        "plus_input and atol"}[bench.format]


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"text {value[:40]!r}"
    return f"{type(value).__name__} {value!r}"[:60]


def _field(obj: dict, name: str, where: str, kinds: tuple, what: str, required: bool = True):
    if name not in obj:
        if required:
            raise _RowError(f"{where}: field '{name}' is missing ({what})")
        return None
    value = obj[name]
    if not required and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise _RowError(f"{where}: field '{name}' is {_kind(value)}, expected {what}")
    return value


def _text(obj: dict, name: str, where: str, what: str = "non-empty text", required: bool = True) -> str | None:
    value = _field(obj, name, where, (str,), what, required)
    if value is not None and not value.strip():
        raise _RowError(f"{where}: field '{name}' is empty, expected {what}")
    return value


def _source_id(obj: dict, where: str, name: str = "id") -> str | None:
    value = _field(obj, name, where, (str, int), "text or an integer (optional)", required=False)
    return None if value is None else str(value)


def _number_text(value) -> str:
    """An answer given as a JSON number, as the text the checkers compare (12.0 -> 12)."""
    if isinstance(value, int):
        return str(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _math_answer(bench: LocalBenchmark, obj: dict, where: str) -> dict:
    problem = _text(obj, "problem", where, "the problem statement: non-empty text")
    answer = _field(obj, "answer", where, (str, int, float), "the final answer: non-empty text or a number")
    if isinstance(answer, float) and not math.isfinite(answer):
        raise _RowError(f"{where}: field 'answer' is {answer!r}, expected a finite number or text")
    if isinstance(answer, str) and not answer.strip():
        raise _RowError(f"{where}: field 'answer' is empty, expected the final answer")
    answer = answer.strip() if isinstance(answer, str) else _number_text(answer)
    # the MATH-500 prompt (data/benchmarks.py), zero-shot: the answer is checked on its last \boxed{}
    return {"prompt": f"Problem:\n{problem.strip()}\n\nSolution:", "answer": answer,
            "source_id": _source_id(obj, where)}


def _multiple_choice(bench: LocalBenchmark, obj: dict, where: str) -> dict:
    question = _text(obj, "question", where, "the question: non-empty text")
    n = bench.choices
    choices = _field(obj, "choices", where, (list,), f"a list of {n} answer texts")
    if len(choices) != n:
        raise _RowError(f"{where}: field 'choices' has {len(choices)} items, expected {n} ({bench.title} "
                        f"has {n} options a question)")
    for i, choice in enumerate(choices):
        if not isinstance(choice, str) or not choice.strip():
            got = "empty" if isinstance(choice, str) else _kind(choice)
            raise _RowError(f"{where}: field 'choices[{i}]' is {got}, expected non-empty text")
    answer = _field(obj, "answer", where, (int, str),
                    f"the correct choice: an index 0-{n - 1} or a letter {LETTERS[0]}-{LETTERS[n - 1]}")
    if isinstance(answer, str):
        if len(answer) != 1 or answer not in LETTERS[:n]:
            raise _RowError(f"{where}: field 'answer' is {answer!r}, expected a letter "
                            f"{LETTERS[0]}-{LETTERS[n - 1]} (or an index 0-{n - 1})")
        label = LETTERS.index(answer)
    else:
        if not 0 <= answer < n:
            raise _RowError(f"{where}: field 'answer' is {answer}, out of range: expected an index 0-{n - 1} "
                            f"(0-based, one of the {n} choices) or a letter {LETTERS[0]}-{LETTERS[n - 1]}")
        label = answer
    subject = _text(obj, "subject", where, "non-empty text (optional)", required=False)
    # MMLU's prompt (data/benchmarks.py): the lettered options, the answer letter scored after "Answer:"
    header = ("The following are multiple choice questions (with answers) about "
              f"{subject.strip().replace('_', ' ')}.\n\n" if subject else "")
    options = "".join(f"\n{letter}. {c.strip()}" for letter, c in zip(LETTERS, choices))
    return {"context": f"{header}{question.strip()}{options}\nAnswer:", "choices": [f" {x}" for x in LETTERS[:n]],
            "label": label, "subject": subject, "source_id": _source_id(obj, where)}


def _inputs(obj: dict, name: str, where: str, non_empty: bool) -> list:
    inputs = _field(obj, name, where, (list,), "a list of argument lists (one per test input)")
    if non_empty and not inputs:
        raise _RowError(f"{where}: field '{name}' is an empty list, expected at least one argument list")
    for i, args in enumerate(inputs):
        if not isinstance(args, list):
            raise _RowError(f"{where}: field '{name}[{i}]' is {_kind(args)}, expected a list (the arguments "
                            f"of one call)")
    return inputs


def _evalplus(bench: LocalBenchmark, obj: dict, where: str) -> dict:
    task_id = _text(obj, "task_id", where, "the task's id: non-empty text")
    prompt = _text(obj, "prompt", where, "the prompt: non-empty text")
    entry_point = _text(obj, "entry_point", where, "the function's name: a Python identifier")
    if not entry_point.isidentifier() or keyword.iskeyword(entry_point):
        raise _RowError(f"{where}: field 'entry_point' is {entry_point!r}, expected a Python identifier "
                        f"(the function the tests call)")
    canonical = _text(obj, "canonical_solution", where, "the reference solution: non-empty text")
    base = _inputs(obj, "base_input", where, non_empty=True)
    plus = _inputs(obj, "plus_input", where, non_empty=False)
    atol = _field(obj, "atol", where, (int, float), "a number >= 0 (the tolerance of float outputs)")
    if not math.isfinite(atol) or atol < 0:
        raise _RowError(f"{where}: field 'atol' is {atol!r}, expected a finite number >= 0")
    try:   # the inputs travel as JSON text: one column type for every task's arguments
        base_json, plus_json = json.dumps(base), json.dumps(plus)
    except (TypeError, ValueError, RecursionError) as e:
        raise _RowError(f"{where}: fields 'base_input' / 'plus_input' cannot be written back as JSON ({e})") from None
    model_prompt = prompt.strip() + "\n"   # EvalPlus's direct completion: the prompt stripped, then a newline
    return {"prompt": model_prompt, "protocol": "evalplus",
            "problem": {"task_id": task_id, "benchmark": bench.protocol, "prompt": model_prompt,
                        "entry_point": entry_point, "reference": prompt + canonical, "atol": float(atol),
                        "base_input_json": base_json, "plus_input_json": plus_json,
                        "n_base": len(base), "n_plus": len(plus)},
            "source_id": task_id}
