"""MELT as a model variant + cache: chunk-wise forward vs streaming decode, the interpolation's end
points, the constant cache size over T, and served batches."""
import pytest
import torch

from cache_helpers import small_model, stream
from loopkv.cache import make_cache
from loopkv.cache.melt import MeltCache
from loopkv.models.melt_gate import VARIANTS
from loopkv.models.melt_model import melt_from_teacher


def melt(teacher, gate="full", chunk=None, seed=1):
    """A MELT student of `teacher` with random (not zero) gates, so the gate is exercised."""
    student = melt_from_teacher(teacher, gate, chunk_size=chunk).eval()
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in student.named_parameters():
            if ".melt_gate." in name:
                p.normal_(0.0, 0.3)
    return student


@pytest.fixture(scope="module")
def teacher():
    return small_model(loops=3).double()


@pytest.fixture(scope="module")
def ids():
    torch.manual_seed(0)
    return torch.randint(3, 61, (2, 10))


@pytest.mark.parametrize("gate", VARIANTS)
def test_chunk_size_one_forward_equals_streaming_decode(teacher, ids, gate):
    student = melt(teacher, gate, chunk=1)
    with torch.no_grad():
        chunked = student(ids, cache=MeltCache(student.config)).logits
    streamed = stream(student, MeltCache(student.config), ids, prefill=1)
    torch.testing.assert_close(chunked, streamed, rtol=0, atol=1e-5)


def test_chunks_see_earlier_chunks_through_final_rows_only(teacher, ids):
    """Chunk 4: the first chunk is one parallel forward; token 4 (next chunk) equals a streamed
    token after a 4-token prefill, and differs from the one-chunk (parallel) forward."""
    student = melt(teacher, chunk=4)
    with torch.no_grad():
        chunked = student(ids, cache=MeltCache(student.config)).logits
        student.config.melt_chunk_size = None
        parallel = student(ids, cache=MeltCache(student.config)).logits
        student.config.melt_chunk_size = 4
    streamed = stream(student, MeltCache(student.config), ids[:, :5], prefill=4)
    torch.testing.assert_close(chunked[:, :5], streamed, rtol=0, atol=1e-8)
    torch.testing.assert_close(chunked[:, :4], parallel[:, :4], rtol=0, atol=1e-8)
    assert (chunked[:, 4:] - parallel[:, 4:]).abs().max() > 1e-3


def test_training_forward_matches_inference_and_reaches_every_chunk(teacher, ids):
    """With gradients on, rows are overwritten out of place; values equal the in-place decode and
    gradients flow from the last chunk's loss back into the first chunk's gate inputs."""
    student = melt(teacher, chunk=3)
    with torch.no_grad():
        reference = student(ids, cache=MeltCache(student.config)).logits
    embeds = student.model.embed_tokens(ids).detach().requires_grad_(True)
    logits = student(inputs_embeds=embeds, cache=MeltCache(student.config)).logits
    torch.testing.assert_close(logits, reference, rtol=0, atol=1e-10)
    logits[:, -1].sum().backward()
    assert embeds.grad[:, 0].abs().sum() > 0     # token 0 (chunk 1) reaches the last token via its final rows
    assert student.model.layers[0].self_attn.melt_gate.input_gate.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("chunk", [None, 1, 4])
def test_alpha_zero_is_the_teacher_exactly(teacher, ids, chunk):
    student = melt(teacher, chunk=chunk)
    with torch.no_grad():
        got = student(ids, cache=MeltCache(student.config, alpha=0.0)).logits
        want = teacher(ids).logits
    assert torch.equal(got, want)


def test_alpha_one_is_melt_and_alpha_interpolates(teacher, ids):
    student = melt(teacher, chunk=2)
    with torch.no_grad():
        pure = student(ids, cache=MeltCache(student.config)).logits
        one = student(ids, cache=MeltCache(student.config, alpha=1.0)).logits
        half = student(ids, cache=MeltCache(student.config, alpha=0.5)).logits
        want = teacher(ids).logits
    assert torch.equal(pure, one)
    assert 0 < (half - want).abs().max() and 0 < (half - pure).abs().max()


def test_last_gate_streamed_is_final_loop_reuse(teacher, ids):
    """h_t = x_t: a token's row is its last loop's K/V, which is the final-loop baseline."""
    student = melt(teacher, "last", chunk=1)
    got = stream(student, MeltCache(student.config), ids, prefill=1)
    want = stream(teacher, make_cache("final_loop", teacher.config), ids, prefill=1)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("loops", [2, 4, 8])
def test_bytes_per_token_do_not_grow_with_loops(loops):
    teacher = small_model(loops=loops, layers=3, heads=2, head_dim=8)
    student = melt(teacher, chunk=2)
    cache = MeltCache(student.config)
    tokens = torch.randint(3, 61, (2, 7))
    with torch.no_grad():
        student(tokens, cache=cache)
        student(tokens[:, :1], cache=cache)
    formula = 2 * 3 * 2 * 8 * 4            # 2 * D * H * d_head * float32 bytes, no T
    assert cache.bytes_per_token(torch.float32) == formula
    assert cache.allocated_bytes() == 2 * 8 * formula          # batch 2, 8 tokens
    assert make_cache("full", teacher.config).bytes_per_token(torch.float32) == loops * formula


def test_interpolating_cache_counts_its_base_rows(teacher, ids):
    student = melt(teacher, chunk=None)
    cache = MeltCache(student.config, alpha=0.5)
    with torch.no_grad():
        student(ids, cache=cache)
    T = teacher.config.total_ut_steps
    assert cache.allocated_bytes() == (1 + T) * ids.numel() * cache.bytes_per_token(torch.float64)


@pytest.mark.parametrize("chunk", [1, None])   # None: as served, the prompt in one parallel forward
def test_padded_batch_generates_like_single_rows(teacher, chunk):
    student = melt(teacher, chunk=chunk)
    prompts = [[5, 9, 11, 4, 7], [8, 3]]
    from loopkv.eval.generation import greedy_generate
    factory = lambda: MeltCache(student.config)   # noqa: E731
    batched = greedy_generate(student, prompts, 6, batch_size=2, cache_factory=factory, eos_id=-1)
    single = [greedy_generate(student, [p], 6, batch_size=1, cache_factory=factory, eos_id=-1)[0] for p in prompts]
    assert batched == single


def test_melt_model_refuses_other_caches_and_teacher_refuses_melt(teacher, ids):
    student = melt(teacher)
    with pytest.raises(TypeError, match="melt cache"):
        student(ids, cache=make_cache("full", teacher.config))
    with pytest.raises(TypeError, match="MELT models only"):
        teacher(ids, cache=MeltCache(teacher.config))
    with pytest.raises(ValueError, match="alpha"):
        MeltCache(teacher.config, alpha=1.5)


def test_generate_builds_a_melt_cache_by_default(teacher):
    student = melt(teacher, chunk=1)
    out = student.generate(torch.tensor([[5, 9, 11]]), max_new_tokens=3, do_sample=False, pad_token_id=0)
    factory = lambda: MeltCache(student.config)   # noqa: E731
    from loopkv.eval.generation import greedy_generate
    assert out[0, 3:].tolist() == greedy_generate(student, [[5, 9, 11]], 3, 1, factory, eos_id=-1)[0]


def test_saved_model_serves_sequentially(teacher, ids, tmp_path):
    """Trained chunk-wise, served token by token: a whole-prompt forward equals streaming decode."""
    from loopkv.models.melt_model import load_melt, save_melt
    student = melt(teacher, chunk=4)
    save_melt(student, tmp_path / "m")
    assert student.config.melt_chunk_size == 4          # the trainer's model is left as it was
    served = load_melt(tmp_path / "m", "float64")
    assert served.config.melt_chunk_size == 1 and served.config.melt_train_chunk_size == 4
    with torch.no_grad():
        got = served(ids, cache=MeltCache(served.config)).logits
    torch.testing.assert_close(got, stream(student, MeltCache(student.config), ids, prefill=1), rtol=0, atol=1e-10)


def test_student_is_built_where_the_teacher_lives():
    """A served MELT student sits on its teacher's device (the serving benchmark's GPU run once
    built it on the CPU beside a CUDA teacher: inputs and weights on different devices)."""
    with torch.device("meta"):
        teacher = small_model(loops=2)
    student = melt_from_teacher(teacher, "full")
    assert {p.device.type for p in student.parameters()} == {"meta"}
