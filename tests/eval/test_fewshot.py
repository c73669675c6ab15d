"""Few-shot prompts: deterministic per item, never showing the item itself, the same in any shard,
and what lm-eval actually sends the model."""
import json

import pytest

from loopkv.errors import LoopKVError
from loopkv.eval.fewshot import SEPARATOR, shot_indices, with_shots


def _rows(n):
    return [{"id": f"t-{i}", "prompt": f"Question: q{i}?\nAnswer:", "answer": str(i),
             "shot": f"Question: q{i}?\nAnswer: worked {i}\n#### {i}"} for i in range(n)]


def test_each_items_shots_are_seeded_by_the_item_alone_and_exclude_it():
    for index in range(10):
        chosen = shot_indices(10, index, 5, seed=7)
        assert chosen == shot_indices(10, index, 5, seed=7)            # deterministic
        assert index not in chosen and len(set(chosen)) == 5 and all(0 <= j < 10 for j in chosen)
    assert shot_indices(10, 3, 5, seed=7) != shot_indices(10, 3, 5, seed=8)   # the seed matters
    assert len({tuple(shot_indices(50, i, 5, seed=1)) for i in range(50)}) > 40  # items differ
    with pytest.raises(LoopKVError, match="5 shots need more than 5 items"):
        shot_indices(5, 0, 5, seed=0)


def test_prompts_are_the_shots_then_the_item():
    rows = _rows(6)
    shot_rows = with_shots(rows, 2, seed=3, task="t")
    for i, (row, original) in enumerate(zip(shot_rows, rows)):
        parts = row["prompt"].split(SEPARATOR)
        assert len(parts) == 3 and parts[-1] == original["prompt"]
        assert [p.split("\n")[0] for p in parts[:2]] == [f"Question: q{j[2:]}?" for j in row["shot_ids"]]
        assert f"#### {i}" not in row["prompt"] and f"q{i}?" not in SEPARATOR.join(parts[:2])
        assert row["answer"] == original["answer"] and row["id"] == original["id"]
    assert with_shots(rows, 0, seed=3, task="t") == rows
    with pytest.raises(LoopKVError, match="item 1 has no worked example"):
        with_shots([rows[0], {"id": "x", "prompt": "p"}, rows[2]], 1, seed=0, task="t")


def test_lm_eval_sends_the_same_shot_prompt_for_an_item_in_any_shard(tmp_path):
    from lm_eval.api.model import LM

    from loopkv.eval.lm_runner import run_task
    from loopkv.eval.lm_tasks import task_config

    data = tmp_path / "data"
    data.mkdir()
    rows = [{**r, "answer": str(i)} for i, r in enumerate(_rows(8))]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    class Recorder(LM):
        def __init__(self):
            super().__init__()
            self.contexts = []

        def generate_until(self, requests):
            self.contexts += [r.args[0] for r in requests]
            return ["#### 3" for _ in requests]

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    seen = {}
    for docs in ([1, 3, 5], [3], [0, 2, 3, 7]):
        lm = Recorder()
        cfg = task_config("loopkv_gsm8k", data, max_gen_toks=8, shots=3, shot_seed=11, work_dir=tmp_path)
        out = run_task(lm, cfg, docs)
        assert [s["exact_match"] for s in out["samples"]] == [float(d == 3) for d in docs]
        for d, context in zip(docs, lm.contexts):
            seen.setdefault(d, set()).add(context)
    assert all(len(contexts) == 1 for contexts in seen.values())   # one prompt per item, whatever the shard
    context = seen[3].pop()
    assert context.endswith(rows[3]["prompt"]) and context.count("Question:") == 4 and "#### 3" not in context


def test_shots_are_refused_for_a_task_without_worked_examples():
    from loopkv.config import load_config

    with pytest.raises(LoopKVError, match=r"lm_eval\.tasks\[1\]\.shots.*no worked examples"):
        load_config({"lm_eval": {"tasks": [{"name": "gsm8k", "shots": 5}, {"name": "mmlu", "shots": 5}]}})
    assert load_config({"lm_eval": {"tasks": [{"name": "gsm8k", "shots": 5}]}})["lm_eval"]["tasks"][0]["shots"] == 5


@pytest.mark.parametrize("name, marker", [("gsm8k", "\n#### "), ("math500", "\\boxed")])
def test_the_benchmark_rows_carry_their_worked_example(name, marker):
    from loopkv.data.benchmarks import BENCHMARKS

    rows, _ = BENCHMARKS[name].read()
    assert all(r["shot"].startswith(r["prompt"] + " ") and marker in r["shot"] for r in rows)
    if name == "gsm8k":   # the worked answer ends in the gold number
        assert all(r["shot"].rsplit("#### ", 1)[1].replace(",", "").strip() == r["answer"] for r in rows[:200])
