"""The looped LM reproduces an independent implementation's outputs on a real-format Ouro checkpoint."""
import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

import loopkv.models.modeling_ouro  # noqa: F401  (registers model type "ouro")
from loopkv.cache import make_cache
from loopkv.models import OuroConfig, OuroForCausalLM

TOL = 1e-4


@pytest.fixture(scope="module")
def expected(reference_dir):
    return np.load(reference_dir / "expected.npz")


def test_auto_classes_load_ouro_without_remote_code(reference_dir):
    config = AutoConfig.from_pretrained(reference_dir)
    assert isinstance(config, OuroConfig)
    assert config.total_ut_steps == 3 and config.head_dim == 16
    model = AutoModelForCausalLM.from_pretrained(reference_dir)
    assert isinstance(model, OuroForCausalLM)


def test_every_checkpoint_tensor_is_used(reference_dir, reference_model):
    from safetensors import safe_open

    with safe_open(reference_dir / "model.safetensors", "pt") as f:
        names = set(f.keys())
        assert names == set(reference_model.state_dict())
        for name in names:  # loaded, not re-initialised
            assert torch.equal(f.get_tensor(name), reference_model.state_dict()[name])


def test_final_logits(reference_model, expected):
    with torch.no_grad():
        out = reference_model(torch.tensor(expected["tokens"]), use_cache=False)
    np.testing.assert_allclose(out.logits.numpy(), expected["logits_final"], atol=TOL, rtol=0)


def test_every_loop_logits_and_exit_at_step(reference_model, expected):
    tokens = torch.tensor(expected["tokens"])
    with torch.no_grad():
        out = reference_model(tokens, output_loop_logits=True, use_cache=False)
        for t in range(3):
            np.testing.assert_allclose(out.loop_logits[t].numpy(), expected["logits_per_loop"][t], atol=TOL, rtol=0)
            exited = reference_model(tokens, exit_at_step=t, use_cache=False)
            np.testing.assert_allclose(exited.logits.numpy(), expected["logits_per_loop"][t], atol=TOL, rtol=0)


def test_exit_distribution(reference_model, expected):
    with torch.no_grad():
        out = reference_model(torch.tensor(expected["tokens"]), use_cache=False)
    np.testing.assert_allclose(out.exit_pdf.numpy(), expected["exit_pdf"], atol=TOL, rtol=0)
    np.testing.assert_allclose(out.exit_pdf.sum(-1).numpy(), 1.0, atol=1e-6)


def test_exit_threshold_picks_first_loop_whose_cdf_reaches_it(reference_model, expected):
    tokens = torch.tensor(expected["tokens"])
    pdf = expected["exit_pdf"]
    for q in (0.0, 0.3, 0.6, 1.0):
        with torch.no_grad():
            out = reference_model(tokens, exit_threshold=q, use_cache=False)
        cdf = pdf.cumsum(-1)
        want_step = np.where((cdf >= q - 1e-6).any(-1), (cdf >= q - 1e-6).argmax(-1), 2)
        # ties at the boundary are float-sensitive; only compare tokens clearly on one side
        clear = np.abs(cdf - q).min(-1) > 1e-4
        assert (out.exit_step.numpy()[clear] == want_step[clear]).all()
        want = np.take_along_axis(expected["logits_per_loop"].transpose(1, 2, 0, 3),
                                  out.exit_step.numpy()[..., None, None], axis=2)[:, :, 0]
        np.testing.assert_allclose(out.logits.numpy(), want, atol=TOL, rtol=0)


def test_cached_prefill_then_decode_equals_full_forward(reference_model, expected):
    tokens = torch.tensor(expected["tokens"])
    cache = make_cache("full", reference_model.config)
    with torch.no_grad():
        pieces = [reference_model(tokens[:, :5], cache=cache).logits]
        for i in range(5, tokens.shape[1]):
            pieces.append(reference_model(tokens[:, i:i + 1], cache=cache).logits)
    np.testing.assert_allclose(torch.cat(pieces, 1).numpy(), expected["logits_final"], atol=TOL, rtol=0)
    assert cache.get_seq_length() == tokens.shape[1]


def test_bad_exit_step_is_rejected(reference_model, expected):
    with pytest.raises(ValueError, match="exit_at_step"):
        reference_model(torch.tensor(expected["tokens"]), exit_at_step=3)
