"""Codec distillation (LLA Eq. 5) through the DeepSpeed engine, on both looped families (Ouro's loops,
Huginn's core steps from a random initial state): exactness at full rank, the loss terms, learning,
bitwise resume after an interruption, best-KL selection."""
import sys
from pathlib import Path

import pytest
import torch
from run_compare import assert_same_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import small_huginn  # noqa: E402

from loopkv.analysis.calibration import Calibration, capture_kv
from loopkv.cache import make_cache
from loopkv.cache.settings import cache_factory, svd_codec
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.train.distill import CodecDistiller, distill_codec, heldout_match

CFG = {"steps": 6, "batch_size": 4, "seq_len": 16, "lr": 3e-2, "warmup_steps": 1, "min_lr_ratio": 0.05,
       "weight_decay": 0.0, "grad_clip": 1.0, "lambda_attn": 0.5, "zero_stage": 2, "eval_every": 2,
       "checkpoint_every": 2, "dtype": "float32"}


@pytest.fixture(scope="module", params=["ouro", "huginn"])
def teacher(request):
    if request.param == "huginn":   # prelude 1, a core of 2 layers run 2 steps, coda 1
        return small_huginn(steps=2, layers=2, heads=2, head_dim=16, seed=0, std=0.1)
    config = OuroConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2, total_ut_steps=2,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=0.2)
    torch.manual_seed(0)
    return OuroForCausalLM(config).eval()


@pytest.fixture(scope="module")
def calibration(teacher):
    torch.manual_seed(1)
    cal = Calibration(("per_head", "per_loop"))
    k, v = capture_kv(teacher, torch.randint(3, 61, (8, 16)))
    cal.add(k.flatten(0, 1), v.flatten(0, 1))
    return cal


def lla(rank_k, rank_v):
    return {"method": "lla", "kwargs": {"rank_k": rank_k, "rank_v": rank_v}, "ratio": None}


def batches(step):
    return torch.randint(3, 61, (CFG["batch_size"], CFG["seq_len"]), generator=torch.Generator().manual_seed(step))


VAL = torch.randint(3, 61, (4, 16), generator=torch.Generator().manual_seed(99))


def view_of(teacher, calibration, setting):
    return cache_factory(setting, teacher.config, svd_codec(setting, teacher.config, calibration))()


def test_full_rank_codec_has_zero_loss(teacher, calibration):
    width = teacher.config.total_ut_steps * teacher.config.head_dim
    distiller = CodecDistiller(teacher, view_of(teacher, calibration, lla(width, width)), 0.5)
    terms = distiller(VAL)
    assert float(terms["kl"]) < 1e-6 and float(terms["attn"]) < 1e-9 and float(terms["top1"]) == 1.0


def test_loss_terms_are_the_definitions(teacher, calibration):
    view = view_of(teacher, calibration, lla(2, 3))
    torch.manual_seed(5)   # Huginn's initial state: the distiller's first draw, repeated below
    terms = CodecDistiller(teacher, view, 0.5)(VAL)
    from loopkv.cache.teacher_forced import teacher_forced_forward
    torch.manual_seed(5)
    run = teacher.loop_forward_kwargs(VAL, grad=True)
    with torch.no_grad():
        t, t_trace = teacher_forced_forward(teacher, VAL, make_cache("full", teacher.config), **run)
        s, s_trace = teacher_forced_forward(teacher, VAL, view, t_trace, **run)
    p, log_p, log_q = t.logits.softmax(-1), t.logits.log_softmax(-1), s.logits.log_softmax(-1)
    kl = (p * (log_p - log_q)).sum(-1).mean()
    assert len(t_trace.outputs) == 4   # (T loops or core steps) x D looped layers = 2 x 2
    attn = sum(((s_trace.outputs[key] - t_trace.outputs[key]) ** 2).mean() for key in t_trace.outputs) / 4
    torch.testing.assert_close(terms["kl"], kl, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(terms["attn"], attn, atol=1e-8, rtol=1e-5)
    torch.testing.assert_close(terms["loss"].detach(), kl + 0.5 * attn, atol=1e-6, rtol=1e-5)
    assert float(terms["kl"]) > 1e-4   # rank 2/3 of 32 is lossy


def test_every_loop_trains_the_codec(teacher, calibration):
    """Pass 2 has gradient in every loop (Huginn's reference runs an int step count without grad):
    each loop's decoder rows of V get a gradient."""
    view = view_of(teacher, calibration, lla(2, 3))
    CodecDistiller(teacher, view, 0.5)(VAL)["loss"].backward()
    dh, grad = teacher.config.head_dim, view.codec.up_v.grad
    assert grad is not None and grad.shape[1] == teacher.config.total_ut_steps * dh
    for loop in range(teacher.config.total_ut_steps):
        assert float(grad[:, loop * dh:(loop + 1) * dh].abs().sum()) > 0, f"loop {loop} got no gradient"


def test_distillation_lowers_heldout_kl_and_returns_the_best(teacher, calibration, tmp_path):
    result = distill_codec({**CFG, "steps": 12}, teacher, view_of(teacher, calibration, lla(2, 3)), batches, VAL,
                           tmp_path / "ck", progress=False)
    heldout = result["curve"]["heldout"]
    assert [p["step"] for p in heldout] == [0, 2, 4, 6, 8, 10, 12]
    assert min(p["kl"] for p in heldout[1:]) < heldout[0]["kl"]          # better than the SVD init
    assert result["best"]["kl"] == min(p["kl"] for p in heldout)
    assert all(p.requires_grad is False for p in teacher.parameters())


def test_heldout_measurement_repeats_and_leaves_the_random_stream(teacher, calibration):
    """Checkpoint selection compares like with like: the same codec measures the same KL every time
    (Huginn's initial states are the same draws), and measuring does not move training's random stream."""
    distiller = CodecDistiller(teacher, view_of(teacher, calibration, lla(2, 3)), 0.5)
    torch.manual_seed(11)
    first = heldout_match(distiller, VAL, 2)
    after = torch.rand(3)
    torch.manual_seed(11)
    torch.rand(1)
    assert heldout_match(distiller, VAL, 2) == first
    torch.manual_seed(11)
    torch.testing.assert_close(torch.rand(3), after, rtol=0, atol=0)


def test_interrupted_run_resumes_bitwise(teacher, calibration, tmp_path):
    torch.manual_seed(7)   # each run is a job, which seeds itself (Huginn draws initial states)
    whole = distill_codec(CFG, teacher, view_of(teacher, calibration, lla(2, 3)), batches, VAL,
                          tmp_path / "whole", progress=False)

    def dying(step):
        if step == 4:   # killed after the step-4 checkpoint
            raise KeyboardInterrupt
        return batches(step)

    torch.manual_seed(7)
    with pytest.raises(KeyboardInterrupt):
        distill_codec(CFG, teacher, view_of(teacher, calibration, lla(2, 3)), dying, VAL, tmp_path / "cut",
                      progress=False)
    torch.manual_seed(8)   # a resumed job's own seed is overridden by the checkpoint's random state
    resumed = distill_codec(CFG, teacher, view_of(teacher, calibration, lla(2, 3)), batches, VAL,
                            tmp_path / "cut", progress=False)
    assert_same_run(whole, resumed, "codec_state")      # curves include each checkpoint's state fingerprint
    prints = [r["fingerprint"] for r in whole["curve"]["train"] if "fingerprint" in r]
    assert len(prints) == 3 and len({p["weights"] for p in prints}) == 3 and len({p["optimizer"] for p in prints}) == 3
    assert "resumes" not in whole["curve"]
    assert resumed["curve"]["resumes"] == [{"step": 4, "fingerprint": prints[1], "matches_saved": True}]
