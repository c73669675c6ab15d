"""Greedy generation: cached (streaming) equals uncached, for batched left-padded prompts."""
import torch

from loopkv.eval.generation import greedy_generate, left_pad
from loopkv.models import OuroConfig, OuroForCausalLM


def trained_like_model(seed=0):
    """A random model with larger weights, so greedy continuations are varied, not constant."""
    config = OuroConfig(vocab_size=61, hidden_size=48, num_hidden_layers=2, total_ut_steps=3,
                        num_attention_heads=4, head_dim=12, intermediate_size=96, rope_theta=10000.0,
                        max_position_embeddings=256, initializer_range=0.3)
    torch.manual_seed(seed)
    return OuroForCausalLM(config).eval()


PROMPTS = [[1, 5, 9, 33], [1, 7, 7, 8, 9, 10, 11, 40, 2], [1, 22], [1, 3, 4, 5, 6, 7]]


def test_generate_with_cache_equals_without_cache_left_padded_batch():
    model = trained_like_model()
    ids, mask = left_pad(PROMPTS, pad_id=0)
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
                  pad_token_id=0, eos_token_id=None)
    cached = model.generate(use_cache=True, **kwargs)
    uncached = model.generate(use_cache=False, **kwargs)
    assert torch.equal(cached, uncached)
    assert len(set(cached[:, ids.shape[1]:].flatten().tolist())) > 3  # not a degenerate constant


def test_padding_does_not_change_a_prompts_continuation():
    model = trained_like_model(1)
    batched = greedy_generate(model, PROMPTS, max_new_tokens=10, batch_size=4, eos_id=-1)
    alone = [greedy_generate(model, [p], max_new_tokens=10, batch_size=1, eos_id=-1)[0] for p in PROMPTS]
    assert batched == alone


def test_padded_logits_match_unpadded_logits():
    model = trained_like_model(2)
    ids, mask = left_pad(PROMPTS, pad_id=0)
    with torch.no_grad():
        padded = model(ids, attention_mask=mask, use_cache=False).logits
        for row, prompt in enumerate(PROMPTS):
            single = model(torch.tensor([prompt]), use_cache=False).logits[0]
            # float32 GEMMs of different shapes round differently (1.4e-5 seen on an AMD EPYC); a mask
            # or position bug is off by far more than 1e-4
            torch.testing.assert_close(padded[row, -len(prompt):], single, atol=1e-4, rtol=1e-4)
