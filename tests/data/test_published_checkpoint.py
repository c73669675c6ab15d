"""A checkpoint is used as it ships (published Ouro layout from loopkv random-checkpoint): its
tokenizer exactly as tokenizer.json defines it (checked against the tokenizers library on digit
strings), prompts framed by its own post-processor (no BOS), generation ended at its eos and its chat
template's turn end, and a MELT student saved from it loadable with no remote code."""
import json

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from loopkv.data.encoding import encode_prompt
from loopkv.data.tokenizer import load_tokenizer, train_tokenizer
from loopkv.eval.generation import end_of_generation_ids
from loopkv.models.melt_model import melt_from_teacher, save_melt
from loopkv.models.loading import load_teacher
from loopkv.models.random_checkpoint import write_random_checkpoint

ARCH = {"hidden_size": 32, "num_hidden_layers": 2, "total_ut_steps": 2, "num_attention_heads": 2, "head_dim": 16,
        "intermediate_size": 48, "rope_theta": 10000.0, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
        "sublayer_norm_init": 1.0}
DIGITS = [" 61", "7", " 1024 + 365 = 1389", "#### 48\n", "The pass key is 71432. Remember it. 71432"]


@pytest.fixture(scope="module")
def published(tmp_path_factory, train_slice):
    out = tmp_path_factory.mktemp("ouro") / "Ouro-tiny"
    write_random_checkpoint(out, ARCH, 384, [train_slice.read_text()], dtype="float32")
    return out


def test_layout_is_the_published_one(published):
    config = json.loads((published / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_ouro.OuroForCausalLM"
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (0, 0, 0)
    assert json.loads((published / "tokenizer_config.json").read_text())["tokenizer_class"] == "GPT2Tokenizer"
    # its vocabulary holds merged digits, which tokenizer.json's pre-tokenizer never lets through
    vocab = Tokenizer.from_file(str(published / "tokenizer.json")).get_vocab()
    assert any(len(t.lstrip("Ġ")) > 1 and t.lstrip("Ġ").isdigit() for t in vocab)


def test_the_tokenizer_is_tokenizer_json_exactly(published, train_slice, tmp_path):
    shipped = Tokenizer.from_file(str(published / "tokenizer.json"))
    loaded = load_tokenizer(published)
    # data.tokenizer.kind = pretrained copies it into results/: the copy must encode the same way
    train_tokenizer({"kind": "pretrained", "path": str(published)}, train_slice, tmp_path / "copy")
    copied = load_tokenizer(tmp_path / "copy")
    for text in DIGITS:
        expected = shipped.encode(text, add_special_tokens=False).ids
        assert loaded.encode(text, add_special_tokens=False) == expected, text
        assert copied.encode(text, add_special_tokens=False) == expected, text
    assert [loaded.decode([i]) for i in loaded.encode(" 61", add_special_tokens=False)] == [" ", "6", "1"]


def test_prompts_are_framed_by_the_tokenizer_itself(published, tokenizer):
    ouro = load_tokenizer(published)
    assert encode_prompt(ouro, "Q: 2 + 2") == ouro.encode("Q: 2 + 2", add_special_tokens=False)   # no BOS
    assert encode_prompt(tokenizer, "Q: 2 + 2")[0] == tokenizer.bos_token_id == 1                 # ours: <bos>


def test_generation_ends_at_eos_and_at_the_chat_turn_end(published, reference_model, tokenizer):
    ouro = load_tokenizer(published)
    model = load_teacher(published)
    im_end = ouro.convert_tokens_to_ids("<|im_end|>")
    assert end_of_generation_ids(model, ouro) == sorted({0, im_end})
    assert end_of_generation_ids(reference_model, tokenizer) == [2]   # the tiny tokenizer: its <eos> only


def test_a_student_from_it_loads_without_remote_code(published, tmp_path):
    teacher = load_teacher(published)
    save_melt(melt_from_teacher(teacher, "full", chunk_size=4), tmp_path / "melt")
    saved = json.loads((tmp_path / "melt/config.json").read_text())
    assert "auto_map" not in saved
    student = AutoModelForCausalLM.from_pretrained(tmp_path / "melt")
    ids = torch.tensor([[5, 6, 7]])
    assert student(ids).logits.shape == (1, 3, 384)
