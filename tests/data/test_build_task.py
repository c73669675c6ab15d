import pytest

from loopkv.data.tasks import TASKS, build_task
from loopkv.errors import LoopKVError
from loopkv.utils.atomic import read_jsonl

SMALL = {
    "passkey": {"train_examples": 4, "eval_trials": 2, "train_lengths": [160], "eval_lengths": [160, 240],
                "key_digits": 5, "filler": "corpus"},
    "arithmetic": {"train_examples": 50, "eval_examples": 10, "min_steps": 2, "max_steps": 4, "max_operand": 9,
                   "max_value": 99, "ops_per_line": 1},
    "cloze": {"eval_examples": 5, "num_choices": 4, "context_words": 48, "continuation_words": 8},
}
GENERATIVE_KEYS = {"id", "task", "prompt", "target", "answer", "meta"}
MC_KEYS = {"id", "task", "context", "choices", "label", "meta"}


def test_registry_names():
    assert set(TASKS) == {"passkey", "arithmetic", "cloze"}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_build_task_writes_the_splits(name, corpus_dir, tokenizer_dir, tmp_path):
    stats = build_task(name, SMALL[name], 5, corpus_dir, tokenizer_dir, tmp_path / "out")
    expected_splits = {"train", "test"} if name != "cloze" else {"test"}
    assert set(stats["splits"]) == expected_splits
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(f"{s}.jsonl" for s in expected_splits)
    for split in expected_splits:
        rows = read_jsonl(tmp_path / "out" / f"{split}.jsonl")
        assert len(rows) == stats["splits"][split]["examples"] > 0
        assert all(set(r) == (MC_KEYS if name == "cloze" else GENERATIVE_KEYS) for r in rows)
        assert all(r["task"] == name for r in rows)
        assert [r["id"] for r in rows] == [f"{name}-{split}-{i:05d}" for i in range(len(rows))]
    # same seed, same bytes
    build_task(name, SMALL[name], 5, corpus_dir, tokenizer_dir, tmp_path / "again")
    for split in expected_splits:
        assert (tmp_path / "again" / f"{split}.jsonl").read_bytes() == (tmp_path / "out" / f"{split}.jsonl").read_bytes()


def test_unknown_task_names_the_key(tmp_path):
    with pytest.raises(LoopKVError, match=r"data\.tasks"):
        build_task("gsm8k", {}, 1, None, None, tmp_path)


def test_missing_key_names_it(tmp_path):
    cfg = {k: v for k, v in SMALL["arithmetic"].items() if k != "max_operand"}
    with pytest.raises(LoopKVError, match=r"data\.tasks\.arithmetic\.max_operand is missing"):
        build_task("arithmetic", cfg, 1, None, None, tmp_path)


def test_task_needing_the_corpus_says_so(tmp_path):
    with pytest.raises(LoopKVError, match="--corpus"):
        build_task("cloze", SMALL["cloze"], 1, None, None, tmp_path)
