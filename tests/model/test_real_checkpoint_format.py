"""A checkpoint laid out like the published Ouro ones (auto_map to remote code, extra config keys)
loads into our class without trust_remote_code and computes the same logits."""
import json
import shutil

import numpy as np
import torch
from transformers import AutoModelForCausalLM

import loopkv.models.modeling_ouro  # noqa: F401  (registers model type "ouro")
from loopkv.models import OuroForCausalLM


def test_published_layout_loads_locally(tmp_path, reference_dir):
    ckpt = tmp_path / "ouro"
    shutil.copytree(reference_dir, ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config.update({
        "auto_map": {"AutoConfig": "configuration_ouro.OuroConfig",
                     "AutoModelForCausalLM": "modeling_ouro.OuroForCausalLM"},
        "layer_types": ["full_attention"] * config["num_hidden_layers"],
        "sliding_window": None, "use_sliding_window": False, "max_window_layers": config["num_hidden_layers"],
        "rope_scaling": None, "attention_dropout": 0.0,
    })
    (ckpt / "config.json").write_text(json.dumps(config))
    model = AutoModelForCausalLM.from_pretrained(ckpt)
    assert type(model) is OuroForCausalLM
    expected = np.load(reference_dir / "expected.npz")
    with torch.no_grad():
        logits = model(torch.tensor(expected["tokens"]), use_cache=False).logits
    np.testing.assert_allclose(logits.numpy(), expected["logits_final"], atol=1e-4, rtol=0)


def test_save_pretrained_round_trip(tmp_path, reference_model, reference_dir):
    reference_model.save_pretrained(tmp_path / "copy")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "copy")
    tokens = torch.tensor(np.load(reference_dir / "expected.npz")["tokens"])
    with torch.no_grad():
        assert torch.equal(again(tokens, use_cache=False).logits, reference_model(tokens, use_cache=False).logits)
