"""Our Huginn port reproduces the numbers the authors' own code computed for a real-format Huginn
checkpoint (tests/fixtures/huginn-tiny-reference, copied from the shared fixture)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM

from loopkv.cache import make_cache
from loopkv.errors import LoopKVError
from loopkv.models import HuginnConfig, HuginnForCausalLM
from loopkv.models.rope import Rotary

HUGINN = Path(__file__).parents[1] / "fixtures" / "huginn-tiny-reference"
TOL = 2e-5   # float32 against the reference's float32: <= 1.7e-6 measured (issue 23 asks for 1e-4)


@pytest.fixture(scope="module")
def expected():
    return np.load(HUGINN / "expected.npz")


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(HUGINN).eval()


def inputs(expected):
    return torch.tensor(expected["tokens"]), torch.tensor(expected["input_states"])


def close(got: torch.Tensor, want) -> None:
    np.testing.assert_allclose(got.detach().numpy(), want, atol=TOL, rtol=0)


def test_auto_classes_load_every_tensor_of_the_checkpoint(model):
    config = AutoConfig.from_pretrained(HUGINN)
    assert isinstance(config, HuginnConfig) and isinstance(model, HuginnForCausalLM)
    assert (config.num_hidden_layers, config.total_ut_steps, config.num_outer_layers) == (2, 4, 2)
    _, info = AutoModelForCausalLM.from_pretrained(HUGINN, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"))
    state = model.state_dict()
    with safe_open(HUGINN / "model.safetensors", "pt") as f:
        names = set(f.keys())
        assert names == set(state) - {"lm_head.weight"}   # the tied head is not in the file
        for name in names:   # loaded, not re-initialised
            assert torch.equal(f.get_tensor(name), state[name]), name
    assert model.lm_head.weight is model.transformer.wte.weight


@pytest.mark.parametrize("index", range(5))
def test_logits_for_every_step_count(model, expected, index):
    tokens, states = inputs(expected)
    with torch.no_grad():
        out = model(tokens, input_states=states, num_steps=int(expected["steps"][index]))
    close(out.logits, expected["logits_by_steps"][index])


def test_latent_states_core_states_and_prelude_output(model, expected):
    tokens, states = inputs(expected)
    with torch.no_grad():
        out = model(tokens, input_states=states, num_steps=4, output_core_states=True)
    close(out.latent_states, expected["latent_states"])
    assert len(out.core_states) == 4
    for step, state in enumerate(out.core_states):
        close(state, expected["core_states"][step])
    close(out.prelude_out, expected["prelude_out"])


def test_init_scale_zero_starts_from_the_zero_state(model, expected):
    tokens, _ = inputs(expected)
    with torch.no_grad():
        zero = model(tokens, num_steps=4, init_scale=0.0).logits
        explicit = model(tokens, num_steps=4, input_states=torch.zeros(2, 10, 64)).logits
    close(zero, expected["logits_zero_state"])
    assert torch.equal(zero, explicit)


def test_random_initial_state_is_the_cut_normal_times_the_embedding_scale(model):
    torch.manual_seed(0)
    state = model.initial_state(torch.zeros(8, 256, 64))
    sigma = (2 / (5 * 64)) ** 0.5 * 8    # 0.632; cut at 3 sigma the std is 0.9866 sigma
    assert state.abs().max() <= 3 * sigma
    assert abs(state.std().item() - 0.9866 * sigma) < 0.01
    assert torch.equal(model.initial_state(torch.zeros(2, 3, 64), init_scale=0.0), torch.zeros(2, 3, 64))


def test_a_step_pair_runs_its_steps_and_only_the_second_part_with_grad(model, expected):
    tokens, states = inputs(expected)
    pair = model(tokens, input_states=states, num_steps=(3, 1))
    close(pair.logits, expected["logits_by_steps"][2])   # num_steps 4
    core = model.transformer.core_block[0].attn.Wqkv.weight
    grads = {}
    for steps in ((3, 1), 4):   # an int n is n steps without grad, as in the reference
        model.zero_grad()
        with torch.enable_grad():
            core.requires_grad_(True)
            model(tokens, input_states=states, num_steps=steps).logits.sum().backward()
        grads[steps] = core.grad
    model.zero_grad()
    assert grads[(3, 1)] is not None and grads[(3, 1)].abs().sum() > 0
    assert grads[4] is None


def test_cached_decode_one_token_at_a_time_and_in_a_chunk(model, expected):
    tokens, states = inputs(expected)
    prefill = int(expected["cached_prefill_len"])
    for name, size in (("logits_cached", 1), ("logits_cached_chunk", 4)):
        cache = make_cache("full", model.config)
        pieces = []
        with torch.no_grad():
            for start, end in [(0, prefill)] + [(s, s + size) for s in range(prefill, 10, size)]:
                pieces.append(model(tokens[:, start:end], input_states=states[:, start:end], num_steps=4,
                                    past_key_values=cache, cache_position=torch.arange(start, end)).logits)
        close(torch.cat(pieces, dim=1), expected[name])
        assert cache.get_seq_length() == 10


def test_decode_positions_default_to_the_tokens_after_the_cached_ones(model, expected):
    """Without cache_position the reference rotates a decode token to position 0 (0.11 off); ours
    continues after the cached tokens, the same as passing it."""
    tokens, states = inputs(expected)
    cache = make_cache("full", model.config)
    with torch.no_grad():
        pieces = [model(tokens[:, :6], input_states=states[:, :6], num_steps=4, cache=cache).logits]
        for t in range(6, 10):
            pieces.append(model(tokens[:, t:t + 1], input_states=states[:, t:t + 1], num_steps=4, cache=cache).logits)
    close(torch.cat(pieces, dim=1), expected["logits_cached"])


def test_interleaved_rope_rotates_adjacent_pairs():
    """out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i+1] cos + x[2i] sin, angle p theta^(-2i/d)."""
    rotary = Rotary(8, 50000.0, "interleaved")
    x = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    positions = torch.tensor([[0, 5, 41]])
    got = rotary.apply(x, *rotary.cos_sin(positions, torch.float64))
    angle = positions[0, :, None].double() * 50000.0 ** (-torch.arange(0, 8, 2).double() / 8)
    even, odd = x[0, 0, :, 0::2], x[0, 0, :, 1::2]
    want = torch.stack([even * angle.cos() - odd * angle.sin(), odd * angle.cos() + even * angle.sin()], -1)
    torch.testing.assert_close(got[0, 0], want.flatten(-2), atol=1e-6, rtol=0)


def test_generate_with_the_cache_equals_an_uncached_argmax_loop(model, expected):
    prompt = torch.tensor(expected["tokens"])[:, :4]
    out = model.generate(prompt, max_new_tokens=5, do_sample=False, num_steps=4, init_scale=0.0,
                         pad_token_id=0, eos_token_id=None)
    ids = prompt
    with torch.no_grad():
        for _ in range(5):
            logits = model(ids, num_steps=4, init_scale=0.0, use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ids)


def test_a_left_padded_row_computes_the_authors_logits(model, expected):
    """The reference ignores attention_mask (its batches are never padded); ours masks left pads, so a
    row padded in a batch gives the logits the authors' code gives it alone (zero initial state)."""
    tokens, _ = inputs(expected)
    pads = 3
    padded = torch.cat([torch.zeros(2, pads, dtype=tokens.dtype), tokens], dim=1)
    padded[1, :pads] = tokens[1, :pads]   # row 1 unpadded: 13 real tokens beside row 0's 10
    mask = torch.ones_like(padded)
    mask[0, :pads] = 0
    with torch.no_grad():
        logits = model(padded, attention_mask=mask, num_steps=4, init_scale=0.0).logits
    close(logits[0, pads:], expected["logits_zero_state"][0])


# -- checkpoints that must not load ----------------------------------------------------------
def edited_checkpoint(tmp_path, config_edits=None, tensor_edits=None) -> Path:
    from safetensors.torch import load_file, save_file

    directory = tmp_path / "huginn"
    shutil.copytree(HUGINN, directory)
    config = json.loads((directory / "config.json").read_text())
    config.update(config_edits or {})
    (directory / "config.json").write_text(json.dumps(config))
    if tensor_edits:
        tensors = load_file(directory / "model.safetensors")
        for name, edit in tensor_edits.items():
            tensors[name] = edit(tensors[name])
        save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


def test_wrong_vocabulary_padding_is_refused(tmp_path):
    pad_rows = lambda w: torch.cat([w, torch.zeros(256, w.shape[1])])  # noqa: E731
    cases = [   # (config edits, tensor edits)
        ({"padded_vocab_size": 512}, None),                                 # config: padded != vocab
        ({}, {"transformer.wte.weight": pad_rows}),                         # weights padded, config not
        ({"vocab_size": 512, "padded_vocab_size": 512}, None),              # config padded, weights not
    ]
    for i, (config_edits, tensor_edits) in enumerate(cases):
        directory = edited_checkpoint(tmp_path / str(i), config_edits, tensor_edits)
        with pytest.raises(LoopKVError, match="padded_vocab_size"):
            AutoModelForCausalLM.from_pretrained(directory)


def test_a_rope_table_other_than_rope_base_gives_is_refused(tmp_path):
    directory = edited_checkpoint(tmp_path, {"rope_base": 10000})
    with pytest.raises(LoopKVError, match="freqs_cis"):
        AutoModelForCausalLM.from_pretrained(directory)


def test_importing_loopkv_models_registers_huginn_lazily():
    probe = ("import sys, loopkv, loopkv.models\n"
             "assert 'torch' not in sys.modules\n"
             "import transformers\n"
             "from loopkv.models import HuginnConfig\n"
             f"print(type(transformers.AutoConfig.from_pretrained({str(HUGINN)!r})).__name__)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split()[-1] == "HuginnConfig"
