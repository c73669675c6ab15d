"""Broken checkpoints give a clear error naming the file, not a traceback from deep inside torch."""
import json
import shutil

import pytest
import torch

from loopkv.errors import LoopKVError
from loopkv.models.loading import load_teacher, teacher_config
from loopkv.train.checkpoint import load_checkpoint, save_checkpoint


def test_truncated_weights_are_reported(tmp_path, reference_dir):
    ckpt = tmp_path / "ouro"
    shutil.copytree(reference_dir, ckpt)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(LoopKVError, match="truncated or corrupt"):
        load_teacher(ckpt)


def test_missing_config_and_weights_are_reported(tmp_path, reference_dir):
    with pytest.raises(LoopKVError, match="no config.json"):
        load_teacher(tmp_path)
    shutil.copy(reference_dir / "config.json", tmp_path / "config.json")
    with pytest.raises(LoopKVError, match="no weight files"):
        load_teacher(tmp_path)


def test_the_teachers_config_is_read_and_checked_without_its_weights(tmp_path, reference_dir):
    # what melt-memory reads (the prompt token) before its measurements, holding no weights meanwhile
    ckpt = tmp_path / "ouro"
    shutil.copytree(reference_dir, ckpt)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])   # unreadable weights: the config is still there
    config = teacher_config(ckpt)
    written = json.loads((reference_dir / "config.json").read_text())
    for key in ("model_type", "bos_token_id", "hidden_size", "num_hidden_layers", "total_ut_steps", "vocab_size"):
        assert getattr(config, key) == written[key], key
    with pytest.raises(LoopKVError, match="no config.json"):
        teacher_config(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(LoopKVError, match="model_type 'gpt2'"):
        teacher_config(tmp_path)


def test_loaded_teacher_is_frozen_and_in_eval_mode(reference_dir):
    model = load_teacher(reference_dir)
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())


def test_truncated_training_checkpoint_is_reported(tmp_path):
    save_checkpoint(tmp_path, {"step": 3, "weights": torch.arange(1000.0)})
    assert load_checkpoint(tmp_path)["step"] == 3
    path = tmp_path / "last.pt"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(LoopKVError, match="corrupt or truncated"):
        load_checkpoint(tmp_path)
    assert load_checkpoint(tmp_path / "none") is None


def test_checkpoint_write_leaves_no_temporary_files(tmp_path):
    save_checkpoint(tmp_path, {"step": 1})
    save_checkpoint(tmp_path, {"step": 2})
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_truncated_foreign_or_mismatched_codec_files_are_reported(tmp_path):
    from loopkv.cache.settings import read_codec_file

    setting = {"method": "lla", "kwargs": {"rank_k": 2, "rank_v": 3}}
    path = tmp_path / "codec.pt"
    torch.save({"setting": setting, "codec_state": {"w": torch.arange(4000.0)}}, path)
    assert read_codec_file(path, setting)["setting"] == setting
    with pytest.raises(LoopKVError, match="distilled for"):
        read_codec_file(path, {"method": "lla", "kwargs": {"rank_k": 4, "rank_v": 4}})
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(LoopKVError, match="not a loopkv codec"):
        read_codec_file(tmp_path / "other.pt")
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(LoopKVError, match="corrupt or truncated"):
        read_codec_file(path, setting)


def test_a_huginn_checkpoint_loads_as_a_teacher(huginn_reference_dir):
    """model_type huginn_raven loads through the same checks, as loopkv's own Huginn (no remote code),
    and computes the authors' logits (fixture, zero initial state)."""
    import numpy as np

    from loopkv.models import HuginnForCausalLM

    model = load_teacher(huginn_reference_dir)
    assert isinstance(model, HuginnForCausalLM) and not model.training
    assert not any(p.requires_grad for p in model.parameters())
    expected = np.load(huginn_reference_dir / "expected.npz")
    with torch.no_grad():
        logits = model(torch.from_numpy(expected["tokens"]), num_steps=4, init_scale=0.0).logits
    torch.testing.assert_close(logits, torch.from_numpy(expected["logits_zero_state"]), atol=1e-4, rtol=0)


def test_a_foreign_or_truncated_huginn_checkpoint_is_reported(tmp_path, huginn_reference_dir):
    import json

    ckpt = tmp_path / "huginn"
    shutil.copytree(huginn_reference_dir, ckpt)
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(LoopKVError, match="truncated or corrupt"):
        load_teacher(ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(LoopKVError, match=r"model_type 'llama', expected one of \['huginn_raven', 'ouro'\]"):
        load_teacher(ckpt)
