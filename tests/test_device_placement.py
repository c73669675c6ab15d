"""Every KV method computes where its model lives: a streamed decode (prefill, then one token at a
time, as served) on the lazy-tensor device, a second device on a CPU-only machine where a CPU tensor
beside a device tensor fails as it does beside a CUDA tensor (utils/device.py), gives the CPU's
logits. The workflow's commands are run on it end to end in tests/workflow/test_dag_on_device.py."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "cache"))
from cache_helpers import small_model, stream  # noqa: E402

from loopkv.cache.registry import METHODS  # noqa: E402
from loopkv.cache.settings import CODEC_METHODS, cache_factory, configured_setting, new_codec  # noqa: E402
from loopkv.errors import LoopKVError  # noqa: E402
from loopkv.models.melt_model import melt_from_teacher  # noqa: E402
from loopkv.utils.device import model_device, place, release_strict_devices, resolve_device, to_host  # noqa: E402

METHODS_CFG = {"cache_dtype": "bfloat16", "k_share": 0.375, "kv_quant_group": 4, "budgets": {"4x": 4.0}, "rope_share": 0.25,
               "query_adapter": True}
HEAD_DIM = 16   # kv_quant packs 8 values a byte
CASES = [(m, p) for m in METHODS for p in (METHODS[m].read_paths or (None,))]


@pytest.fixture(autouse=True, scope="module")
def _strict_devices_end_with_this_module():
    """The lazy device's two-device check (utils/device.py) covers this module's tests only: it costs
    every later torch call of the session a Python dispatch."""
    yield
    release_strict_devices()


def _served(method, read_path, device):
    teacher = small_model(loops=4, layers=4, head_dim=HEAD_DIM)
    with torch.no_grad():   # a tamer init than the cache tests' (0.3), whose decodes amplify round-off chaotically
        for p in teacher.parameters():
            p.mul_(0.2)
    if method == "melt":
        model = melt_from_teacher(teacher, "full", chunk_size=1).eval()
        factory = cache_factory({"method": "melt", "kwargs": {}}, model.config)
    else:
        model = teacher
        budget = "1x" if method == "full" else "4x"
        setting = configured_setting(METHODS_CFG, method, budget, model.config)
        codec = None
        if method in CODEC_METHODS:   # a projection onto random orthonormal directions, as an SVD init is
            torch.manual_seed(1)
            codec = new_codec(setting, model.config)
            with torch.no_grad():
                for kind in ("k", "v"):
                    mu, down, up = codec.params(kind)
                    basis = torch.linalg.qr(torch.randn(down.shape)).Q
                    down.copy_(basis), up.copy_(basis), mu.normal_(std=0.1)
        codec = None if codec is None else codec.to(device)
        factory = cache_factory(setting, model.config, codec, read_path=read_path)
    return place(model, device), factory


@pytest.mark.parametrize("method,read_path", CASES)
def test_a_streamed_decode_on_another_device_equals_the_cpu(method, read_path):
    tokens = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(0))
    cpu_model, cpu_factory = _served(method, read_path, "cpu")
    expected = stream(cpu_model, cpu_factory(), tokens)
    lazy = resolve_device("lazy")
    model, factory = _served(method, read_path, lazy)
    got = stream(model, factory(), tokens.to(lazy))
    assert got.device.type == "lazy"
    # equal to float round-off (the lazy backend computes e.g. RoPE's sin/cos with its own kernels);
    # kv_quant: a value on a rounding boundary may take the neighbouring code
    tolerance = 2e-3 if method == "kv_quant" else 1e-4
    torch.testing.assert_close(got.cpu(), expected, atol=tolerance, rtol=1e-4)


def test_a_cpu_tensor_beside_a_lazy_one_fails_as_beside_a_cuda_one():
    lazy = resolve_device("lazy")
    with pytest.raises(RuntimeError):
        torch.ones(3, device=lazy) + torch.ones(3)
    torch.ones(3, device=lazy) + torch.tensor(2.0)     # a 0-dim CPU tensor is allowed, as on CUDA


def test_resolve_device_rules():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("gpu", "cuda:x", "cpu; rm -rf /", ""):
        with pytest.raises(LoopKVError, match="launch.device"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(LoopKVError, match="no CUDA device"):
            resolve_device("cuda")


def test_checkpoint_state_goes_to_the_host():
    lazy = resolve_device("lazy")
    model = place(small_model(head_dim=HEAD_DIM), lazy)
    assert model_device(model).type == "lazy"
    state = to_host({"model": model.state_dict(), "step": 3, "curve": [torch.ones(2, device=lazy)]})
    assert all(t.device.type == "cpu" for t in state["model"].values()) and state["curve"][0].device.type == "cpu"
