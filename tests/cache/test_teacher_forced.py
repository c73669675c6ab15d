"""The teacher-forced view (one parallel forward, earlier tokens read through the method) against
streaming decode through the method's own cache. That every method's view converges to its streaming
decode is tests/cache/test_every_method.py's teacher_forced check; here the view's own parts."""
import pytest
import torch

from cache_helpers import small_model, stream
from loopkv.analysis.calibration import Calibration, capture_kv
from loopkv.cache import make_cache
from loopkv.cache.latent_codec import LAYOUTS, LatentCodec
from loopkv.cache.teacher_forced import TeacherForcedCache, diagonal_exact_attention, teacher_forced_forward

LOOPS, LAYERS, HEADS, HEAD_DIM = 3, 2, 4, 12
SIZES = {"layer": LAYERS, "head": HEADS, "loop": LOOPS, "dim": HEAD_DIM}


@pytest.fixture(scope="module")
def model():
    return small_model(loops=LOOPS, layers=LAYERS, heads=HEADS, head_dim=HEAD_DIM).double()


@pytest.fixture(scope="module")
def calibration(model):
    torch.manual_seed(1)
    cal = Calibration(tuple(LAYOUTS))
    k, v = capture_kv(model, torch.randint(3, 61, (4, 20)))
    cal.add(k.flatten(0, 1).double(), v.flatten(0, 1).double())
    return cal


def build(model, calibration, method, layout, extra, ranks=(3, 5)):
    kwargs = dict(extra)
    if layout is not None:
        codec = LatentCodec(SIZES, LAYOUTS[layout], {"k": ranks[0], "v": ranks[1]}).double()
        codec.init_from_moments({k: calibration.moments[layout, k].mean() for k in "kv"},
                                {k: calibration.moments[layout, k].covariance() for k in "kv"})
        kwargs["codec"] = codec
    return lambda: make_cache(method, model.config, **kwargs)


def test_diagonal_exact_attention_equals_masked_attention_when_past_is_exact():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 8, dtype=torch.float64) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(diagonal_exact_attention(q, k, v, k, v), want)


def test_full_view_is_the_teacher(model):
    tokens = torch.randint(3, 61, (2, 9))
    out, trace = teacher_forced_forward(model, tokens, make_cache("full", model.config))
    torch.testing.assert_close(out.logits, model(tokens, use_cache=False).logits, atol=1e-9, rtol=0)
    assert len(trace.keys) == LOOPS * LAYERS and len(trace.outputs) == LOOPS * LAYERS


def test_two_pass_reads_the_teachers_reconstructed_past(model, calibration):
    """The paper's two-pass forward: token 1 attends to token 0 exactly as streaming does (token 0's
    K/V are the teacher's, having no past), later tokens only approximately."""
    factory = build(model, calibration, "lla", "per_head", {})
    tokens = torch.randint(3, 61, (2, 6))
    with torch.no_grad():
        _, teacher_trace = teacher_forced_forward(model, tokens, make_cache("full", model.config))
        two_pass, _ = teacher_forced_forward(model, tokens, factory(), teacher_trace)
    streamed = stream(model, factory(), tokens, prefill=1)
    torch.testing.assert_close(two_pass.logits[:, :2], streamed[:, :2], atol=1e-8, rtol=0)
    assert (two_pass.logits[:, 2:] - streamed[:, 2:]).abs().max() > 1e-6


def test_gradients_reach_the_codec_through_the_second_pass(model, calibration):
    factory = build(model, calibration, "lla", "per_head", {})
    view = factory()
    tokens = torch.randint(3, 61, (2, 6))
    with torch.no_grad():
        _, teacher_trace = teacher_forced_forward(model, tokens, make_cache("full", model.config))
    out, _ = teacher_forced_forward(model, tokens, view, teacher_trace)
    out.logits.square().mean().backward()
    for name, p in view.codec.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    model.zero_grad(set_to_none=True)


def test_methods_without_a_parallel_view_say_so(model):
    quant = make_cache("kv_quant", small_model(head_dim=16).config, bits=4)
    with pytest.raises(NotImplementedError, match="no teacher-forced view"):
        quant.reconstruct(0, 0, None)


def test_padded_or_cached_input_is_refused(model):
    tf = TeacherForcedCache(model.config, make_cache("full", model.config))
    with pytest.raises(ValueError, match="whole windows"):
        model(torch.randint(3, 61, (2, 4)), attention_mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]),
              cache=tf, use_cache=False)
