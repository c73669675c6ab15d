import pytest
import torch


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory, tokenizer):
    """A tiny random Ouro checkpoint with the test tokenizer: what the lm-eval tests serve."""
    from loopkv.models import OuroConfig, OuroForCausalLM

    config = OuroConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, total_ut_steps=2,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        max_position_embeddings=256, initializer_range=0.3, pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("teacher")
    OuroForCausalLM(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
