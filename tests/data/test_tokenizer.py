import pytest
from transformers import AutoTokenizer

from loopkv.data.tokenizer import load_tokenizer, train_tokenizer
from loopkv.errors import LoopKVError

TEXT = "  KING. My lord,\n\n\tyou owe me 1024 ducats -- and 7 more!  ünïcode ✓\n"


def test_special_tokens_have_fixed_ids(tokenizer):
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    assert tokenizer.convert_ids_to_tokens([0, 1, 2]) == ["<pad>", "<bos>", "<eos>"]
    assert len(tokenizer) == 300


def test_decoding_round_trips_text(tokenizer, corpus_dir):
    samples = [TEXT, (corpus_dir / "test.txt").read_text()[:3000]]
    for text in samples:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_digits_are_one_token_each(tokenizer):
    for number in ["7", "71432", "1234567890", "000"]:
        tokens = tokenizer.tokenize(number)
        assert tokens == list(number)
    # in running text too: the space before a number stays outside the digits
    tokens = tokenizer.tokenize("The pass key is 71432.")
    assert [t for t in tokens if any(c.isdigit() for c in t)] == list("71432")


def test_training_is_deterministic(train_slice, tokenizer_dir, tmp_path):
    train_tokenizer({"kind": "bpe", "vocab_size": 300}, train_slice, tmp_path / "again")
    assert (tmp_path / "again" / "tokenizer.json").read_bytes() == (tokenizer_dir / "tokenizer.json").read_bytes()


def test_loads_with_autotokenizer_and_pads_left(tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert tok.padding_side == "left"
    batch = tok(["a long line of words", "a"], padding=True, add_special_tokens=False)
    assert batch["input_ids"][1][0] == 0 and batch["attention_mask"][1][0] == 0
    assert batch["attention_mask"][1][-1] == 1


def test_pretrained_kind_copies_a_tokenizer(tokenizer_dir, train_slice, tmp_path):
    stats = train_tokenizer({"kind": "pretrained", "path": str(tokenizer_dir)}, train_slice, tmp_path / "copy")
    copy = load_tokenizer(tmp_path / "copy")
    assert stats["vocab_size"] == 300 and copy.padding_side == "left"
    assert copy(TEXT)["input_ids"] == load_tokenizer(tokenizer_dir)(TEXT)["input_ids"]


def test_stats_count_train_tokens(tokenizer, train_slice, tmp_path):
    stats = train_tokenizer({"kind": "bpe", "vocab_size": 300}, train_slice, tmp_path / "t")
    text = train_slice.read_text()
    assert stats["train_chars"] == len(text)
    assert stats["train_tokens"] == len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert stats["special_token_ids"] == {"<pad>": 0, "<bos>": 1, "<eos>": 2}


@pytest.mark.parametrize("cfg,key", [
    ({"kind": "pretrained", "path": None}, "data.tokenizer.path"),
    ({"kind": "pretrained", "path": "/no/such/dir"}, "data.tokenizer.path"),
    ({"kind": "bpe", "vocab_size": 100}, "data.tokenizer.vocab_size"),
    ({"kind": "wordpiece"}, "data.tokenizer.kind"),
])
def test_bad_config_names_the_key(cfg, key, train_slice, tmp_path):
    with pytest.raises(LoopKVError, match=key.replace(".", r"\.")):
        train_tokenizer(cfg, train_slice, tmp_path / "t")


def test_load_tokenizer_from_empty_dir_is_a_user_error(tmp_path):
    with pytest.raises(LoopKVError):
        load_tokenizer(tmp_path)
