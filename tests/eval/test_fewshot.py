"""Few-shot prompts: deterministic per item, never showing the item itself, the same in any shard,
drawn from the item's own group where the task has groups (BBH's subtasks), and what lm-eval
actually sends the model."""
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


def test_shots_are_refused_for_a_task_without_worked_examples(bigbench_sdist):
    from loopkv.config import load_config

    with pytest.raises(LoopKVError, match=r"lm_eval\.tasks\[1\]\.shots.*no worked examples"):
        load_config({"lm_eval": {"tasks": [{"name": "gsm8k", "shots": 5}, {"name": "mmlu", "shots": 5}]}})
    assert load_config({"lm_eval": {"tasks": [{"name": "gsm8k", "shots": 5}]}})["lm_eval"]["tasks"][0]["shots"] == 5
    with pytest.raises(LoopKVError, match=r"lm_eval\.tasks\[0\]\.shots.*no worked examples"):   # BBH's multiple choice
        load_config({"lm_eval": {"tasks": [{"name": "bbh", "shots": 3}]}})
    bbh_gen = {"data": {"bigbench_sdist": str(bigbench_sdist)}, "lm_eval": {"tasks": [{"name": "bbh_gen", "shots": 3}]}}
    assert load_config(bbh_gen)["lm_eval"]["tasks"][0]["shots"] == 3


@pytest.mark.parametrize("name, marker", [("gsm8k", "\n#### "), ("math500", "\\boxed"), ("bbh_gen", "\nA: ")])
def test_the_benchmark_rows_carry_their_worked_example(name, marker, bigbench_sdist):
    from loopkv.data.benchmarks import BENCHMARKS

    rows, _ = BENCHMARKS[name].read(bigbench_sdist if BENCHMARKS[name].local else None)
    assert all(r["shot"].startswith(r["prompt"] + " ") and marker in r["shot"] for r in rows)
    if name == "gsm8k":   # the worked answer ends in the gold number
        assert all(r["shot"].rsplit("#### ", 1)[1].replace(",", "").strip() == r["answer"] for r in rows[:200])


# ---------------------------------------------------------------- shots from the item's own group (BBH's subtask)


def _grouped(sizes):
    """Rows of subtasks s0, s1, ... interleaved as a sample of them would be, `sizes` items each."""
    rows = []
    for g, n in enumerate(sizes):
        rows += [{"id": f"b-{g}-{i}", "subtask": f"s{g}", "prompt": f"Q: s{g} item {i}?\nA:", "answer": f"({'AB'[i % 2]})",
                  "shot": f"Q: s{g} item {i}?\nA: ({'AB'[i % 2]})"} for i in range(n)]
    return rows[::2] + rows[1::2]


def test_grouped_shots_come_from_the_items_own_group_never_itself():
    rows = _grouped([6, 5, 9])
    shot_rows = with_shots(rows, 3, seed=4, task="t", group="subtask")
    by_id = {r["id"]: r for r in rows}
    for row, original in zip(shot_rows, rows):
        assert len(row["shot_ids"]) == 3 and len(set(row["shot_ids"])) == 3
        assert row["id"] not in row["shot_ids"]                                         # never the item itself
        assert {by_id[j]["subtask"] for j in row["shot_ids"]} == {original["subtask"]}   # its own subtask
        assert row["prompt"] == SEPARATOR.join([*(by_id[j]["shot"] for j in row["shot_ids"]), original["prompt"]])
    assert with_shots(rows, 3, seed=4, task="t", group="subtask") == shot_rows          # deterministic
    # the same seeded draw as without groups, from the group's items: a group of everything is no group
    assert all(shot_indices(12, i, 4, 9, among=range(12)) == shot_indices(12, i, 4, 9) for i in range(12))


def test_a_group_too_small_for_its_shots_or_an_item_without_one_is_refused():
    with pytest.raises(LoopKVError, match="subtask 's1' has 3 items; 3 shots need more than 3"):
        with_shots(_grouped([6, 3]), 3, seed=0, task="t", group="subtask")
    rows = _grouped([6, 6])
    del rows[4]["subtask"]
    with pytest.raises(LoopKVError, match="item 4 has no 'subtask'"):
        with_shots(rows, 2, seed=0, task="t", group="subtask")
    with pytest.raises(LoopKVError, match="not in its own group"):
        shot_indices(10, 3, 2, 0, among=[0, 1, 2])


def test_lm_eval_sends_bbh_gen_its_subtask_shots_the_same_in_any_shard(tmp_path):
    """The bbh_gen task (registered with shot_group subtask): 3 worked examples of the item's own
    subtask, the same prompt whatever the shard, BBH's stops, and exact match of the extracted answer."""
    from lm_eval.api.model import LM

    from loopkv.eval.lm_runner import run_task
    from loopkv.eval.lm_tasks import get_lm_task, task_config

    assert get_lm_task("loopkv_bbh_gen").shot_group == "subtask"
    data = tmp_path / "data"
    data.mkdir()
    rows = [{**r, "accept": [r["answer"]]} for r in _grouped([5, 6, 4])]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    class Recorder(LM):
        def __init__(self):
            super().__init__()
            self.requests = []

        def generate_until(self, requests):
            self.requests += [r.args for r in requests]
            return [" A\n" for _ in requests]      # a bare letter: right for the "(A)" items

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    seen = {}
    for docs in ([0, 4, 9], [4], [2, 4, 11, 14]):
        lm = Recorder()
        cfg = task_config("loopkv_bbh_gen", data, max_gen_toks=16, shots=3, shot_seed=5, work_dir=tmp_path)
        out = run_task(lm, cfg, docs)
        assert [s["exact_match"] for s in out["samples"]] == [float(rows[d]["answer"] == "(A)") for d in docs]
        for d, (context, kwargs) in zip(docs, lm.requests):
            assert kwargs["until"] == ["\n\n", "Q:"] and kwargs["max_gen_toks"] == 16
            seen.setdefault(d, set()).add(context)
    assert all(len(contexts) == 1 for contexts in seen.values())   # one prompt per item, whatever the shard
    context, item = seen[4].pop(), rows[4]
    shots = context.split(SEPARATOR)
    assert len(shots) == 4 and shots[-1] == item["prompt"] and item["shot"] not in shots
    assert all(s.startswith(f"Q: {item['subtask']} item ") for s in shots)


def test_bbh_gen_runs_3_shot_through_the_job_commands_the_same_in_one_shard_or_two(tmp_path, teacher_dir):
    """lm-eval-shard / lm-eval-merge of {name: bbh_gen, shots: 3} on a random tiny teacher: the merged
    result of two shards is the unsharded one (each item's prompt, its own subtask's shots, the same)."""
    from loopkv.cli import main

    teacher = teacher_dir   # the lm-eval tests' tiny random teacher (conftest.py)
    data = tmp_path / "data"
    data.mkdir()
    rows = [{**r, "accept": [r["answer"]]} for r in _grouped([4, 5])]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {"seed": 1, "lm_eval": {"batch_size": 4, "tasks": {"bbh_gen": {"max_gen_toks": 4, "shots": 3, "max_docs": 6}}},
           "methods": {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"2x": 2.0}}, "model": {"dtype": "float32"}}
    merged = {}
    for shards in (1, 2):
        outs = [tmp_path / f"s{shards}-{i}.json" for i in range(shards)]
        for i, out in enumerate(outs):
            assert main(["lm-eval-shard", "--cfg", json.dumps(cfg), "--task", "loopkv_bbh_gen", "--data", str(data),
                         "--method", "full", "--budget", "1x", "--teacher", str(teacher), "--shard", str(i),
                         "--shards", str(shards), "--out", str(out)]) == 0
        assert main(["lm-eval-merge", *map(str, outs), "--out", str(tmp_path / f"m{shards}.json")]) == 0
        merged[shards] = json.loads((tmp_path / f"m{shards}.json").read_text())
    one, two = merged[1], merged[2]
    assert (one["shots"], one["headline"], one["n"]) == (3, "exact_match", 6)
    assert set(one["metrics"]) >= {"exact_match", "no_answer"}
    assert one["doc_ids"] == two["doc_ids"] and one["samples"] == two["samples"] and one["metrics"] == two["metrics"]


def test_bbh_gen_max_docs_per_group_through_the_job_commands(tmp_path, teacher_dir):
    """{name: bbh_gen, max_docs_per_group: 2}: every shard evaluates its share of one per-group selection
    (min(2, size) items of each subtask), the merge covers it and both record what each subtask gave;
    more shards than selected items fail before any model is read."""
    from loopkv.cli import main
    from loopkv.eval.lm_runner import select_docs
    from loopkv.utils.seeding import derive_seed

    teacher = teacher_dir   # the lm-eval tests' tiny random teacher (conftest.py)
    data = tmp_path / "data"
    data.mkdir()
    rows = [{**r, "accept": [r["answer"]]} for r in _grouped([1, 5, 3])]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {"seed": 1, "lm_eval": {"batch_size": 4, "tasks": {"bbh_gen": {"max_gen_toks": 4, "max_docs_per_group": 2}}},
           "methods": {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"2x": 2.0}}, "model": {"dtype": "float32"}}
    expected = select_docs(len(rows), None, derive_seed(1, "lm-eval", "bbh_gen"), max_docs_per_group=2,
                           groups=[r["subtask"] for r in rows])
    assert len(expected) == 1 + 2 + 2

    def shard(i, shards):
        return ["lm-eval-shard", "--cfg", json.dumps(cfg), "--task", "loopkv_bbh_gen", "--data", str(data),
                "--method", "full", "--budget", "1x", "--teacher", str(teacher), "--shard", str(i),
                "--shards", str(shards), "--out", str(tmp_path / f"s{i}of{shards}.json")]

    outs = [tmp_path / f"s{i}of2.json" for i in range(2)]
    for i in range(2):
        assert main(shard(i, 2)) == 0
    record = {"field": "subtask", "max_docs_per_group": 2, "groups": {"s0": [1, 1], "s1": [2, 5], "s2": [2, 3]}}
    parts = [json.loads(p.read_text()) for p in outs]
    assert all(p["selection"] == expected and p["per_group"] == record for p in parts)
    assert sorted(d for p in parts for d in p["doc_ids"]) == expected
    assert main(["lm-eval-merge", *map(str, outs), "--out", str(tmp_path / "merged.json")]) == 0
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["doc_ids"] == expected and merged["n"] == 5 and merged["per_group"] == record
    assert [rows[d]["id"] for d in expected] == [s["id"] for s in merged["samples"]]
    with pytest.raises(LoopKVError, match="6 shards, but 5 documents are selected"):
        main(["--debug", *shard(0, 6)])
