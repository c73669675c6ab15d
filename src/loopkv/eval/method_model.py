"""A teacher served through one KV method at one budget: what every evaluation of a (method, budget)
cell needs, built in one place (method-eval, the lm-eval model, the passkey grid)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from loopkv.errors import LoopKVError


@dataclass
class MethodModel:
    teacher: torch.nn.Module | None   # the frozen teacher (the reference for fidelity); None if not asked for
    model: torch.nn.Module            # what generates: the teacher, or a MELT student
    tokenizer: object
    setting: dict                     # {"method", "kwargs", "ratio", "budget"}
    cache_factory: Callable           # a fresh cache of the method per call
    codec: torch.nn.Module | None
    read_path: str | None
    codec_training: str | None = None   # a codec's: off_policy (distill) or on_policy (distill-on-policy)

    @property
    def label(self) -> str:
        return f"{self.setting['method']}/{self.setting['budget']}"


def load_method_model(teacher_dir, method: str, budget: str, methods_cfg: dict, dtype: str,
                      codec_path=None, student_dir=None, device="cpu", with_teacher: bool = True) -> MethodModel:
    """The teacher at `teacher_dir` read through `method` at the budget labelled `budget` of
    `methods_cfg` (config section `methods`; "full"/"1x" = the teacher's own cache). Codec methods
    need `codec_path` (a distilled codec); melt needs `student_dir` (a trained MELT model). Everything
    is placed on `device` (utils/device.py). `with_teacher` False: a MELT student is served without
    loading the teacher beside it (nothing but fidelity reads it); other methods serve the teacher itself."""
    from loopkv.cache.registry import codec_methods, read_path_methods
    from loopkv.cache.settings import cache_factory, configured_setting, load_codec, read_codec_file, served_read_path
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.models.loading import load_teacher
    from loopkv.models.melt_model import load_melt

    if (method == "melt") != bool(student_dir):
        raise LoopKVError("a student (a MELT model) goes with method melt, and melt needs one")
    teacher = load_teacher(teacher_dir, dtype, device) if with_teacher or not student_dir else None
    tokenizer = load_tokenizer(teacher_dir)
    model = load_melt(student_dir, dtype, device=device) if student_dir else teacher
    setting = configured_setting(methods_cfg, method, budget, (model if teacher is None else teacher).config)
    codec, training = None, None
    if method in codec_methods():
        if not codec_path:
            raise LoopKVError(f"{method} needs a codec (a distilled codec from `loopkv distill`)")
        saved = read_codec_file(codec_path, setting)
        codec = load_codec(setting, teacher.config, saved["codec_state"], f"codec {codec_path}")
        codec = codec.to(device=device, dtype=teacher.dtype)
        training = "on_policy" if saved.get("on_policy") else "off_policy"
    elif codec_path:
        raise LoopKVError(f"{method} takes no codec (only {', '.join(codec_methods())} do)")
    # only methods with read paths have one (their slice holds methods.read_path; no other slice does)
    read_path = served_read_path(method, methods_cfg["read_path"]) if method in read_path_methods() else None
    factory = cache_factory(setting, model.config, codec, read_path=read_path)
    return MethodModel(teacher, model, tokenizer, setting, factory, codec, read_path, training)
