"""The training stages compute where their model lives, with batches coming from the host: the codec
distiller (off- and on-policy), the MELT distiller and the on-policy draw on the lazy-tensor device
(utils/device.py) give the CPU's terms. Their backward through DeepSpeed runs on it in the workflow
test for melt-train and teacher-pretrain; the distillers' backward trips a bug of the lazy backend
(see tests/workflow/test_dag_on_device.py)."""
import copy

import pytest
import torch
from test_distill import CFG, VAL, calibration, lla, teacher  # noqa: F401  (fixtures)

from loopkv.cache.settings import cache_factory, svd_codec
from loopkv.errors import LoopKVError
from loopkv.models.melt_model import melt_from_teacher
from loopkv.train.distill import CodecDistiller
from loopkv.train.engine import Engine, _check_device
from loopkv.train.melt import MeltDistiller
from loopkv.train.on_policy import on_policy_batches
from loopkv.utils.device import place, release_strict_devices, resolve_device

PROMPTS = [[1, 5, 9, 12], [1, 7, 3], [1, 20, 21, 22, 23, 24], [1, 40]]


@pytest.fixture(autouse=True, scope="module")
def _strict_devices_end_with_this_module():
    """The lazy device's two-device check (utils/device.py) covers this module's tests only: it costs
    every later torch call of the session a Python dispatch."""
    yield
    release_strict_devices()


def _on(device, teacher, calibration, setting):
    model = place(copy.deepcopy(teacher), device)
    codec = svd_codec(setting, teacher.config, calibration).to(device)
    return model, codec


@pytest.mark.parametrize("weighted", [False, True])
def test_codec_distiller_on_another_device_with_host_batches(teacher, calibration, weighted):  # noqa: F811
    lazy = resolve_device("lazy")
    weights = torch.zeros(VAL.shape) if weighted else None
    if weighted:
        weights[:, 4:10] = 1
    terms = {}
    for device in ("cpu", lazy):
        model, codec = _on(device, teacher, calibration, lla(2, 3))
        distiller = CodecDistiller(model, cache_factory(lla(2, 3), model.config, codec)(), 0.5)
        torch.manual_seed(0)   # Huginn's initial state: the same host draw on either device
        with torch.no_grad():
            out = distiller(VAL, weights)        # host tensors in: the distiller moves them
        terms[str(device)] = {k: float(v) for k, v in out.items()}
    assert terms["lazy"] == pytest.approx(terms["cpu"], rel=1e-4, abs=1e-6)


def test_melt_distiller_on_another_device_with_host_batches(teacher):  # noqa: F811
    if teacher.config.model_type == "huginn_raven":   # MELT's gate has no place for Huginn's outer layers
        with pytest.raises(LoopKVError, match="KV method 'melt' does not serve models with non-looped layers"):
            melt_from_teacher(teacher, "full", chunk_size=4)
        return
    lazy = resolve_device("lazy")
    terms = {}
    for device in ("cpu", lazy):
        student = melt_from_teacher(place(copy.deepcopy(teacher), device), "full", chunk_size=4)
        distiller = MeltDistiller(place(copy.deepcopy(teacher), device), student, beta=1.0)
        with torch.no_grad():
            terms[str(device)] = {k: float(v) for k, v in distiller(VAL).items()}
    assert terms["lazy"] == pytest.approx(terms["cpu"], rel=1e-4, abs=1e-6)


def test_on_policy_draw_on_another_device_gives_host_rows(teacher, calibration):  # noqa: F811
    lazy = resolve_device("lazy")
    rows = {}
    for device in ("cpu", lazy):
        model, codec = _on(device, teacher, calibration, lla(2, 3))
        draw = on_policy_batches(model, cache_factory(lla(2, 3), model.config, codec, read_path="full"), PROMPTS,
                                 {"batch_size": 2, "max_new_tokens": 4, "temperature": 0.0, "seq_len": 12}, seed=3)
        ids, weights = draw(0)
        assert ids.device.type == "cpu" and weights.device.type == "cpu"
        rows[str(device)] = (ids.tolist(), weights.tolist())
    assert rows["lazy"] == rows["cpu"]


def test_the_engine_refuses_a_model_deepspeed_would_move(teacher, calibration):  # noqa: F811
    with pytest.raises(LoopKVError, match="DeepSpeed trains on cuda:0 but the model was placed on cuda:1"):
        _check_device(torch.device("cuda", 1), torch.device("cuda", 0))
    _check_device(torch.device("cpu"), torch.device("cpu"))
    model, codec = _on(resolve_device("lazy"), teacher, calibration, lla(2, 3))
    distiller = CodecDistiller(model, cache_factory(lla(2, 3), model.config, codec)(), 0.5)
    with pytest.raises(LoopKVError, match="zero_stage 0"):
        Engine(distiller, CFG)
