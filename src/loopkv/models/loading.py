"""Load a teacher checkpoint (ours, a real Ouro or a real Huginn one) with errors a user can act on.

Before any weight is read, the tensors the weight files hold (their safetensors headers) are compared
with those the architecture of config.json expects: a missing tensor (which transformers would
silently initialise at random), an unexpected one or a shape mismatch is an error naming the file and
the tensors. After loading, every weight must be finite. A tensor legitimately absent is one tied to
another that is present (the model shares the parameter)."""
from __future__ import annotations

import importlib
import itertools
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from loopkv.errors import LoopKVError
from loopkv.models.families import MODULES
from loopkv.utils.checked_io import check_finite, check_tensors, read_json, safetensors_shapes
from loopkv.utils.device import place

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"


def teacher_config(directory: str | Path):
    """The checkpoint's model config, checked as load_teacher checks it, without loading weights."""
    directory = Path(directory)
    if not (directory / "config.json").exists():
        raise LoopKVError(f"teacher checkpoint {directory}: no config.json (not a Hugging Face model directory)")
    if not any(directory.glob("*.safetensors")) and not any(directory.glob("*.bin")):
        raise LoopKVError(f"teacher checkpoint {directory}: no weight files (*.safetensors)")
    config_json = read_json(directory / "config.json", "model config", fields={"model_type": str})
    if config_json["model_type"] not in MODULES:   # our code runs for it, never the checkpoint's (no remote code)
        raise LoopKVError(f"teacher checkpoint {directory}: model_type {config_json['model_type']!r}, expected one "
                          f"of {sorted(MODULES)} (the looped families loopkv implements)")
    importlib.import_module(MODULES[config_json["model_type"]])
    try:
        return AutoConfig.from_pretrained(directory)
    except Exception as e:   # a config.json whose values the architecture rejects
        raise LoopKVError(f"model config {directory / 'config.json'}: {type(e).__name__}: {e}") from e


def load_teacher(directory: str | Path, dtype: str = "float32", device: str | torch.device = "cpu"):
    """Model in eval mode, weights frozen, on `device` (utils/device.py). A missing, truncated, foreign
    or incomplete checkpoint raises LoopKVError naming the file instead of a traceback from deep
    inside torch (or a silently re-initialised tensor)."""
    directory = Path(directory)
    config = teacher_config(directory)
    try:
        with torch.device("meta"):   # the architecture's tensors, without allocating them
            expected_model = AutoModelForCausalLM.from_config(config)
    except Exception as e:   # a config.json whose values the architecture rejects
        raise LoopKVError(f"model config {directory / 'config.json'}: {type(e).__name__}: {e}") from e
    source = check_weight_files(directory, expected_model)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(directory, dtype=getattr(torch, dtype),
                                                           output_loading_info=True)
    except Exception as e:
        raise LoopKVError(
            f"teacher checkpoint {directory} could not be loaded ({type(e).__name__}: {e}); "
            "it may be truncated or corrupt: re-run the teacher stage or re-download it"
        ) from e
    # what transformers itself reports (the only check of .bin checkpoints, which have no header)
    problems = {k: sorted(map(str, info.get(k) or ())) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if any(problems.values()) or info.get("error_msgs"):
        raise LoopKVError(f"{source}: does not match the architecture (missing {problems['missing_keys']}, "
                          f"unexpected {problems['unexpected_keys']}, mismatched {problems['mismatched_keys']}"
                          f"{', ' + '; '.join(info['error_msgs']) if info.get('error_msgs') else ''})")
    check_finite(itertools.chain(model.named_parameters(), model.named_buffers()), f"{source} (as {dtype})")
    model.eval().requires_grad_(False)
    return place(model, device)


def check_weight_files(directory: Path, expected_model: torch.nn.Module) -> str:
    """Compare the safetensors headers of `directory` with `expected_model`'s tensors (names, shapes);
    returns how to name the weights in messages."""
    if (directory / SAFETENSORS).exists():   # what transformers reads first, as here
        files, source = [SAFETENSORS], f"weights {directory / SAFETENSORS}"
    elif (directory / SAFETENSORS_INDEX).exists():
        index = read_json(directory / SAFETENSORS_INDEX, "weights index", fields={"weight_map": {}})
        files = sorted(set(map(str, index["weight_map"].values())))
        source = f"weights {directory} ({SAFETENSORS_INDEX}: {len(files)} files)"
    else:
        return f"weights in {directory}"   # .bin only: checked through transformers' loading report
    found: dict[str, tuple] = {}
    for name in files:
        path = directory / name
        if not path.is_file():
            raise LoopKVError(f"{source}: the index names {name}, which is not in {directory}")
        found.update(safetensors_shapes(path))
    expected = {k: tuple(v.shape) for k, v in expected_model.state_dict().items()}
    check_tensors(found, expected, source, optional=tied_copies(expected_model, found))
    return source


def tied_copies(model: torch.nn.Module, found) -> set[str]:
    """Names of parameters shared with another name that the file does hold (a tied lm_head, say):
    the file may store the tensor once."""
    groups: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    return {n for names in groups.values() if len(names) > 1 and any(m in found for m in names) for n in names}
