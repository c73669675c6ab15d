import pytest

from loopkv.data.tasks import passkey
from loopkv.data.tasks.common import TaskInputs, word_spans
from loopkv.errors import LoopKVError

CFG = {"train_examples": 12, "eval_trials": 3, "train_lengths": [160, 200], "eval_lengths": [160, 320],
       "key_digits": 5, "filler": "corpus"}


@pytest.fixture(scope="module")
def inputs(corpus_dir, tokenizer_dir):
    return TaskInputs(corpus_dir, tokenizer_dir)


@pytest.fixture(scope="module")
def rows(inputs):
    return {split: passkey.make_examples(CFG, split, 11, inputs) for split in ("train", "test")}


def test_lengths_cycle_and_repeat_as_configured(rows):
    assert [r["meta"]["length"] for r in rows["train"]] == [160, 200] * 6
    assert [r["meta"]["length"] for r in rows["test"]] == [160] * 3 + [320] * 3


def test_token_counts_fit_and_are_close(rows, tokenizer):
    for row in rows["train"] + rows["test"]:
        n = len(tokenizer(row["prompt"] + row["target"], add_special_tokens=False)["input_ids"])
        assert n == row["meta"]["n_tokens"]
        assert row["meta"]["length"] - 12 <= n <= row["meta"]["length"]


def test_key_sits_where_meta_says(rows):
    for row in rows["train"] + rows["test"]:
        meta, key, prompt = row["meta"], row["meta"]["key"], row["prompt"]
        assert len(key) == 5 and key.isdigit() and key[0] != "0"
        assert row["target"] == " " + key and row["answer"] == key
        assert prompt.startswith(passkey.INTRO) and prompt.endswith(passkey.QUESTION)
        assert prompt[meta["needle_offset"]:].startswith(passkey.needle(key))
        assert prompt.count(key) == 1   # in the needle, nowhere else
        # depth: the share of filler words placed before the needle
        words_before = len(prompt[len(passkey.INTRO):meta["needle_offset"]].split())
        assert words_before == meta["words_before"] == round(meta["depth"] * meta["filler_words"])
        assert 0.0 <= meta["depth"] <= 1.0


def test_filler_comes_from_the_right_split(rows, corpus_dir):
    train_text = (corpus_dir / "train.txt").read_text()
    test_text = (corpus_dir / "test.txt").read_text()
    for split, text in (("train", train_text), ("test", test_text)):
        for row in rows[split]:
            meta = row["meta"]
            before = row["prompt"][len(passkey.INTRO):meta["needle_offset"]].strip()
            if before:
                assert before in text


def test_deterministic(inputs, rows):
    assert passkey.make_examples(CFG, "test", 11, inputs) == rows["test"]
    assert passkey.make_examples(CFG, "test", 12, inputs) != rows["test"]


def test_too_short_length_is_a_user_error(inputs):
    with pytest.raises(LoopKVError, match=r"data\.tasks\.passkey\.eval_lengths"):
        passkey.make_examples(dict(CFG, eval_lengths=[20]), "test", 1, inputs)


def test_word_spans():
    assert word_spans(" ab  c\nd ") == [(1, 3), (5, 6), (7, 8)]


def test_classic_filler_is_the_repeated_sentences(inputs, tokenizer):
    cfg = dict(CFG, filler="classic")
    rows = passkey.make_examples(cfg, "test", 5, inputs)
    classic_words = set(passkey.CLASSIC_FILLER.split())
    for row in rows:
        body = row["prompt"][len(passkey.INTRO):-len(passkey.QUESTION)]
        body = body.replace(passkey.needle(row["answer"]), " ")
        assert set(body.split()) <= classic_words
        assert row["meta"]["length"] - 12 <= row["meta"]["n_tokens"] <= row["meta"]["length"]


def test_unknown_filler_is_rejected(inputs):
    with pytest.raises(LoopKVError, match="data.tasks.passkey.filler"):
        passkey.make_examples(dict(CFG, filler="lorem"), "test", 5, inputs)


def test_grid_puts_the_needle_at_each_depth_and_fits_each_length(corpus_dir, tokenizer_dir):
    from loopkv.data.tasks.common import TaskInputs
    from loopkv.data.tasks.passkey import make_grid, needle

    cfg = {"key_digits": 5, "filler": "classic"}
    rows = make_grid(cfg, [120, 200], [0.0, 0.5, 1.0], 2, 3, TaskInputs(corpus_dir, tokenizer_dir))
    assert len(rows) == 2 * 3 * 2 and len({r["id"] for r in rows}) == 12
    for r in rows:
        meta = r["meta"]
        assert meta["length"] - 8 <= meta["n_tokens"] <= meta["length"]
        assert needle(r["answer"]) in r["prompt"]
        # the needle splits the filler at round(depth * words): off by at most half a word
        assert abs(meta["words_before"] - meta["depth"] * meta["filler_words"]) <= 0.5
    assert make_grid(cfg, [120], [0.5], 2, 3, TaskInputs(corpus_dir, tokenizer_dir)) == \
        make_grid(cfg, [120], [0.5], 2, 3, TaskInputs(corpus_dir, tokenizer_dir))
