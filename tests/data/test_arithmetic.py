import random
import re

import pytest

from loopkv.data.tasks.arithmetic import (check_answer, evaluate_chain, extract_final_answer, make_chain,
                                          make_examples)
from loopkv.errors import LoopKVError

CFG = {"train_examples": 500, "eval_examples": 100, "min_steps": 2, "max_steps": 4, "max_operand": 9,
       "max_value": 20, "ops_per_line": 1}


def _replay(prompt: str) -> tuple[int, list[int]]:
    """Re-evaluate a chain from its prompt text alone; also return every running value."""
    start = int(re.search(r"Start with (\d+)\.", prompt).group(1))
    values = [start]
    for word, x in re.findall(r"(Add|Subtract) (\d+)\.", prompt):
        values.append(values[-1] + int(x) if word == "Add" else values[-1] - int(x))
    return values[-1], values


def test_answers_match_the_prompt_and_stay_in_range():
    for split in ("train", "test"):
        for row in make_examples(CFG, split, 5):
            result, values = _replay(row["prompt"])
            assert row["answer"] == str(result)
            assert all(0 <= v <= 20 for v in values)
            assert 2 <= row["meta"]["steps"] == len(values) - 1 <= 4
            assert all(1 <= x <= 9 for _, x in row["meta"]["ops"])
            assert evaluate_chain(row["meta"]["start"], row["meta"]["ops"]) == result
            assert extract_final_answer(row["target"]) == row["answer"]
            assert row["prompt"].startswith("Question: ") and row["prompt"].endswith("\nAnswer:")


def test_worked_steps_are_correct():
    chain = make_chain(random.Random(0), 4, 9, 99)
    steps = re.findall(r"(\d+) ([+-]) (\d+) = (\d+)\.", chain["target"])
    assert len(steps) == 4
    running = chain["meta"]["start"]
    for a, op, b, c in steps:
        assert int(a) == running
        running = int(a) + int(b) if op == "+" else int(a) - int(b)
        assert int(c) == running


def test_a_line_composes_ops_per_line_operations_and_the_chain_is_the_same():
    """ops_per_line k: the same chain (prompt, ops, answer) worked k operations a line; a line restates
    its operations from the running value and gives their result. Hand-checked: 5 +3 -2 +7 -1."""
    for k in (2, 3, 4):
        one, many = make_chain(random.Random(11), 5, 9, 99), make_chain(random.Random(11), 5, 9, 99, k)
        assert (many["prompt"], many["answer"], many["meta"]) == (one["prompt"], one["answer"], one["meta"])
        lines = many["target"].split("\n")[0].strip().split(". ")
        assert len(lines) == -(-5 // k)
        running, seen = many["meta"]["start"], 0
        for line in lines:
            lhs, rhs = line.rstrip(".").split(" = ")
            terms = lhs.split(" ")
            assert int(terms[0]) == running and len(terms) == 1 + 2 * min(k, 5 - seen)
            for op, x in zip(terms[1::2], terms[2::2]):
                running = running + int(x) if op == "+" else running - int(x)
            seen += len(terms) // 2
            assert int(rhs) == running
        assert extract_final_answer(many["target"]) == many["answer"] == str(running)
    row = make_chain(random.Random(0), 3, 9, 99, 3)
    start, (a, x), (b, y), (c, z) = row["meta"]["start"], *row["meta"]["ops"]
    assert row["target"] == f" {start} {a} {x} {b} {y} {c} {z} = {row['answer']}.\n#### {row['answer']}"


def test_steps_cover_the_range():
    steps = {row["meta"]["steps"] for row in make_examples(CFG, "train", 1)}
    assert steps == {2, 3, 4}


def test_test_chains_are_distinct_and_absent_from_train():
    test = make_examples(CFG, "test", 2)
    train = make_examples(CFG, "train", 3, held_out=test)
    test_prompts = {r["prompt"] for r in test}
    assert len(test_prompts) == len(test)
    assert not test_prompts & {r["prompt"] for r in train}


def test_deterministic():
    assert make_examples(CFG, "train", 9) == make_examples(CFG, "train", 9)
    assert make_examples(CFG, "train", 9) != make_examples(CFG, "train", 10)


@pytest.mark.parametrize("text,expected", [
    (" 7 + 5 = 12. 12 - 3 = 9. 9 + 8 = 17.\n#### 17", "17"),
    ("#### 17", "17"),
    ("####17 and then some", "17"),
    ("####-3", "-3"),
    ("####   42\n#### 9", "42"),
    ("#### 007", "7"),
    ("the answer is 17", None),
    ("#### seventeen", None),
    ("", None),
])
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


def test_check_answer():
    assert check_answer(" 3 + 4 = 7.\n#### 7<eos>", "7")
    assert not check_answer(" 3 + 4 = 7.\n#### 8", "7")
    assert not check_answer("7", "7")


def test_impossible_config_is_a_user_error():
    with pytest.raises(LoopKVError, match=r"data\.tasks\.arithmetic\.max_value"):
        make_examples(dict(CFG, max_value=5), "test", 1)
    tiny = dict(CFG, min_steps=1, max_steps=1, max_operand=1, max_value=1, eval_examples=50)
    with pytest.raises(LoopKVError, match=r"data\.tasks\.arithmetic\.eval_examples"):
        make_examples(tiny, "test", 1)
