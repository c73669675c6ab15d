"""Memory against length and bytes against T: byte counts equal the formulas and the allocated
tensors, MELT's per-token bytes do not move with T, a spawned probe reports process memory, and
LLA's curve decodes through its fused read, whose transient grows like its latents, not like K/V."""
import sys
import weakref
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import random_codec, small_model  # noqa: E402

from loopkv.cache import make_cache  # noqa: E402
from loopkv.cache.registry import method_class, read_path_methods  # noqa: E402
from loopkv.cache.settings import cache_factory, configured_setting  # noqa: E402
from loopkv.eval.memory import bytes_over_loops, capacity_read_path, decode_memory_curve, measure  # noqa: E402
from loopkv.models.melt_model import melt_from_teacher, save_melt  # noqa: E402
from loopkv.report.fig_memory import summary  # noqa: E402

METHODS = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"4x": 4.0}}


def test_decoded_cache_bytes_follow_the_formula_and_melt_is_T_times_smaller():
    teacher = small_model(loops=4)
    student = melt_from_teacher(teacher, "full", chunk_size=1).eval()
    prompt = torch.full((2, 3), 5)
    full = decode_memory_curve(teacher, make_cache("full", teacher.config), prompt, [4, 8], torch.bfloat16)
    melt = decode_memory_curve(student, make_cache("melt", student.config), prompt, [4, 8], torch.bfloat16)
    per_token = make_cache("melt", teacher.config).bytes_per_token(torch.float32)
    for f, m in zip(full, melt):
        assert f["cached_tokens"] == m["cached_tokens"] == 2 * (3 + f["generated"])
        assert m["cache_allocated_bytes"] == per_token * m["cached_tokens"]
        assert f["cache_allocated_bytes"] == 4 * m["cache_allocated_bytes"]
        assert m["cache_bytes_at_cache_dtype"] == m["cache_allocated_bytes"] // 2     # bf16 = half of float32
        assert m["peak_memory_bytes"] >= m["memory_bytes"] > 0


def test_bytes_over_loops_allocated_equal_formula_and_melt_is_flat():
    teacher = small_model(loops=4)
    student = melt_from_teacher(teacher, "full", chunk_size=1).eval()
    rows = bytes_over_loops(teacher, student, [("full", "1x", METHODS), ("melt", "4x", METHODS),
                                               ("lla", "4x", METHODS)], [2, 4, 8], torch.bfloat16)
    by = {(r["method"], r["loops"]): r for r in rows}
    for r in rows:
        assert r["allocated_bytes_per_token"] == r["formula_bytes_per_token_compute_dtype"], r
    assert {by["melt", t]["bytes_per_token"] for t in (2, 4, 8)} == {by["full", 2]["bytes_per_token"] // 2}
    assert [by["full", t]["bytes_per_token"] for t in (2, 4, 8)] == [by["full", 2]["bytes_per_token"] * k for k in (1, 2, 4)]
    assert [by["lla", t]["bytes_per_token"] * 4 for t in (2, 4, 8)] == [by["full", t]["bytes_per_token"] for t in (2, 4, 8)]
    assert teacher.config.total_ut_steps == 4 and student.config.total_ut_steps == 4   # the inputs are untouched


def test_probe_runs_in_its_own_process(tmp_path):
    teacher = small_model(loops=2)
    teacher.save_pretrained(tmp_path / "teacher")
    save_melt(melt_from_teacher(teacher, "mean", chunk_size=4), tmp_path / "melt")
    job = {"teacher": str(tmp_path / "teacher"), "student": str(tmp_path / "melt"), "dtype": "float32",
           "methods_cfg": {**METHODS, "budgets": {"2x": 2.0}}, "lengths": [2, 5], "batch": 1, "prompt_len": 3,
           "prompt_token": 5, "threads": 1}
    full, melt = measure([{**job, "method": "full", "budget": "1x"}, {**job, "method": "melt", "budget": "2x"}])
    assert [p["generated"] for p in melt["points"]] == [2, 5]
    assert full["points"][-1]["cache_allocated_bytes"] == 2 * melt["points"][-1]["cache_allocated_bytes"]
    assert melt["process_after_load"]["memory_bytes"] > 0 and melt["memory_measure"].startswith("process RSS")


class PeakNewTensorBytes(TorchDispatchMode):
    """The high-water mark of the bytes of tensor storages that torch ops allocate while the mode is
    on, each counted until it is freed: deterministic, unlike a process's RSS. (Scratch a C++ kernel
    keeps outside torch tensors is not seen: the CPU latent-attention kernel's is a fixed-size tile.)"""

    def __init__(self):
        super().__init__()
        self.live, self.peak, self.tracked = 0, 0, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                 if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()   # views and in-place results share a storage they were given
            if storage.nbytes() and storage.data_ptr() not in given and id(storage) not in self.tracked:
                self.tracked.add(id(storage))
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
                weakref.finalize(storage, self._freed, id(storage), storage.nbytes())
        return out

    def _freed(self, key, nbytes):
        self.tracked.discard(key)
        self.live -= nbytes


def step_peaks(model, factory, contexts, batch=4):
    """Peak new-tensor bytes of one decode step after a prefill of n tokens into a fresh cache, per n."""
    peaks = {}
    for n in contexts:
        cache = factory()
        with torch.no_grad():
            model(torch.full((batch, n), 5), cache=cache)
            with PeakNewTensorBytes() as mode:
                model(torch.full((batch, 1), 5), cache=cache)
        peaks[n] = mode.peak
    return peaks


def test_the_probe_decodes_lla_through_its_fused_read(tmp_path):
    """The memory figure's LLA curve is the capacity path, and says so in the figure's JSON."""
    teacher = small_model(loops=2)
    teacher.save_pretrained(tmp_path / "teacher")
    methods = {**METHODS, "budgets": {"2x": 2.0}}
    setting = configured_setting(methods, "lla", "2x", teacher.config)
    codec = random_codec(setting, teacher.config, dtype=torch.float32)
    torch.save({"setting": setting, "codec_state": codec.state_dict()}, tmp_path / "lla.pt")
    job = {"teacher": str(tmp_path / "teacher"), "student": None, "dtype": "float32", "methods_cfg": methods,
           "lengths": [2, 5], "batch": 1, "prompt_len": 3, "prompt_token": 5, "threads": 1}
    full, lla = measure([{**job, "method": "full", "budget": "1x"},
                         {**job, "method": "lla", "budget": "2x", "codec": str(tmp_path / "lla.pt")}])
    assert (full["read_path"], lla["read_path"]) == (None, "fused")
    assert full["points"][-1]["cache_allocated_bytes"] == 2 * lla["points"][-1]["cache_allocated_bytes"]
    s = summary({"curves": [full, lla]})
    assert s["lla"]["read_path"] == "fused" and s["lla"]["label"] == "LLA 2x (fused read)"
    assert s["full"]["read_path"] is None and "read" not in s["full"]["label"]


def test_capacity_read_path_is_fused_wherever_a_method_has_it():
    assert all(capacity_read_path(m) == "fused" for m in read_path_methods() if "fused" in method_class(m).read_paths)
    assert capacity_read_path("lla") == capacity_read_path("lla2d") == "fused"
    assert capacity_read_path("full") is None                  # no read paths
    assert capacity_read_path("mla_head") == "latent"          # no fused read: its stored latents, decoded per read


@pytest.mark.parametrize("method", ["lla", "lla2d"])
def test_the_fused_reads_transient_grows_like_the_latents_and_the_latent_reads_like_kv(method, monkeypatch):
    """Between two context lengths, a decode step's peak of newly allocated tensors grows on the
    latent path by at least one (loop, layer)'s decoded K and V of the added tokens (the whole
    history is decoded at every read), on the fused path (the probe's) by at most twice the cache's
    own growth (a store's concatenation holds the old and new copies for a moment)."""
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "cpp")   # the fused read's C++ kernel: tiles, no context-sized tensor
    model = small_model(loops=2, layers=2, heads=4, head_dim=16)
    config, batch, (short, long) = model.config, 4, (16, 96)
    setting = configured_setting(METHODS, method, "4x", config)
    codec = random_codec(setting, config, dtype=torch.float32)
    growth, cache_growth = {}, {}
    for path in ("latent", capacity_read_path(method)):
        factory = cache_factory(setting, config, codec, read_path=path)
        peaks = step_peaks(model, factory, (short, long), batch)
        growth[path] = peaks[long] - peaks[short]
        cache_growth[path] = factory().bytes_per_token(torch.float32) * batch * (long - short)
    assert cache_growth["latent"] == cache_growth["fused"]   # the same latents stored
    decoded_kv = 2 * batch * config.num_attention_heads * (long - short) * config.head_dim * 4
    assert growth["latent"] >= decoded_kv + growth["fused"], growth
    assert growth["fused"] <= 2 * cache_growth["fused"] < growth["latent"], (growth, cache_growth)
