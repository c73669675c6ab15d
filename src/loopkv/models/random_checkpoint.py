"""A random-weight checkpoint laid out as the published Ouro ones, for runs of the paper path without
downloading weights (the paper config's CPU twin in the tests, the GPU smoke run at Ouro-1.4B size).

What it reproduces of the published layout (facts about ByteDance/Ouro-1.4B and its -Thinking sibling):
- config.json: model_type "ouro", an `auto_map` to remote-code files that are not in the directory,
  Qwen-style keys the architecture does not use (layer_types, sliding_window, ...), and bos = eos =
  pad = 0, the id of `<|endoftext|>`;
- the tokenizer: tokenizers-format byte-level BPE in tokenizer.json whose pre-tokenizer splits
  digits one by one over a vocabulary that does hold merged digits (so a loader that rebuilds the
  pre-tokenizer gives other ids), tokenizer_config.json naming GPT2Tokenizer, ids 0 / 1 / 2 for
  `<|endoftext|>` / `<|im_start|>` / `<|im_end|>`, and a ChatML chat template whose turns end with
  `<|im_end|>`.
The BPE is trained here on the given text; the weights are the architecture's random init.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
                 "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                 "{% endif %}")
# keys of the published config.json that the architecture ignores (kept, as the real files have them)
PUBLISHED_EXTRAS = {"sliding_window": None, "use_sliding_window": False, "rope_scaling": None,
                    "attention_dropout": 0.0, "hidden_act": "silu", "initializer_range": 0.02}
AUTO_MAP = {"AutoConfig": "configuration_ouro.OuroConfig", "AutoModel": "modeling_ouro.OuroModel",
            "AutoModelForCausalLM": "modeling_ouro.OuroForCausalLM"}


def train_published_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE with Ouro's special tokens; merges learnt over whole numbers, digits split at use."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # numbers too, so merged digits enter the vocabulary as in the published one (prose has few)
    numbers = " ".join(str(n) for n in range(2000)) + "\n"
    tokenizer.train_from_iterator([*texts, numbers * 4], trainer)
    # at use, digits one per pre-token (as the published tokenizer.json): merged digits stay in the vocabulary
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=SPECIALS[0], eos_token=SPECIALS[0],
                                   pad_token=SPECIALS[0], unk_token=SPECIALS[0])


def write_random_checkpoint(out_dir, arch: dict, vocab_size: int, texts: list[str], seed: int = 0,
                            dtype: str = "bfloat16") -> dict:
    """Build the checkpoint in `out_dir`; returns its config.json as written."""
    from loopkv.models import OuroConfig, OuroForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_published_tokenizer(texts, vocab_size)
    tokenizer.save_pretrained(str(out_dir))
    tok_cfg_path = out_dir / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text())
    tok_cfg.update({"tokenizer_class": "GPT2Tokenizer", "chat_template": CHAT_TEMPLATE, "add_prefix_space": False})
    tok_cfg_path.write_text(json.dumps(tok_cfg, indent=2))

    fields = {k: v for k, v in arch.items() if k != "sublayer_norm_init"}   # a from-scratch init knob
    config = OuroConfig(vocab_size=vocab_size, num_key_value_heads=arch["num_attention_heads"],
                        bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False, **fields)
    torch.manual_seed(seed)
    model = OuroForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(str(out_dir))
    config_path = out_dir / "config.json"
    shipped = json.loads(config_path.read_text())
    shipped.update({**PUBLISHED_EXTRAS, "auto_map": AUTO_MAP, "torch_dtype": dtype,
                    "layer_types": ["full_attention"] * arch["num_hidden_layers"],
                    "max_window_layers": arch["num_hidden_layers"]})
    config_path.write_text(json.dumps(shipped, indent=2))
    return shipped
