"""The fused CPU latent-attention kernel (C++, built at first use) equals reconstruct-then-attend for
several shapes, ranks, positions, masks and latent dtypes, folds a decode step's own token exactly,
reads latents in the cache's head-major layout, and its build failure is reported, not hidden."""
import pytest
import torch
from test_latent_attention import SHAPES, _case

from loopkv.errors import LoopKVError
from loopkv.kernels import cpu_kernels, cpu_latent_attention as cpu
from loopkv.kernels.latent_attention import (exact_attention_with_lse, latent_attention, merge_partial_attention,
                                           reference_latent_attention)


@pytest.fixture
def kernel(monkeypatch):
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "cpp")    # build it or fail: these tests must run the C++ pass
    return cpu_kernels.extension()


def _own(args, length, seed=5):
    b, h_kv, d = args[0].shape[0], args[3].shape[0], args[0].shape[-1]
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h_kv, length, d, generator=g), torch.randn(b, h_kv, length, d, generator=g)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("offset,padded", [(0, False), (5000, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_kernel_equals_reconstruct_then_attend(kernel, shape, offset, padded, dtype):
    q, ck, cv, *rest = _case(*shape, offset=offset, padded=padded)
    args = (q, ck.to(dtype), cv.to(dtype), *rest)          # latents stored in the cache's dtype
    ref_out, ref_lse = reference_latent_attention(*args)
    out, lse = latent_attention(*args)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-6, atol=1e-5)


def _no_merge_after_the_kernel(monkeypatch):
    def merged(*_):
        raise AssertionError("the own token was merged after the kernel, not folded into it")
    monkeypatch.setattr(cpu, "exact_attention_with_lse", merged)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[4] == 1] + [(2, 4, 2, 2, 1, 50, 32, 12, 20)])
@pytest.mark.parametrize("padded", [False, True])
def test_decode_step_folds_its_own_token(kernel, shape, padded, monkeypatch):
    """One new token: its exact K/V join the kernel's softmax; equal to attention over the
    reconstructed past merged with the new token."""
    args = _case(*shape, seed=4, offset=100, padded=padded)
    own_k, own_v = _own(args, 1)
    want = merge_partial_attention(*reference_latent_attention(*args), *exact_attention_with_lse(args[0], own_k, own_v, None))
    _no_merge_after_the_kernel(monkeypatch)
    out, lse = cpu.cpu_latent_attention(kernel, *args, rope_tables=_tables(args), own=(own_k, own_v, None))
    torch.testing.assert_close(out, want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, want[1], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("length", [1, 3])
def test_pre_rope_own_keys_are_rotated_at_their_positions(kernel, length):
    """own_tables given: the new tokens' keys arrive pre-RoPE (the kernel rotates a folded one)."""
    from loopkv.models.rope import Rotary, apply_rope

    args = _case(2, 4, 2, 2, length, 30, 32, 6, 10, seed=8, offset=40, padded=True)
    own_k, own_v = _own(args, length, seed=9)
    new_positions = args[7][:, -1:] + 1 + torch.arange(length)
    tables = Rotary(32, 10000.0).cos_sin(new_positions, torch.float32)
    want = latent_attention(*args, own=(apply_rope(own_k, *tables), own_v, None))
    got = latent_attention(*args, own=(own_k, own_v, None), own_tables=tables)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=1e-6, atol=1e-5)
    unrotated = latent_attention(*args, own=(own_k, own_v, None))
    assert not torch.allclose(unrotated[0], want[0], atol=1e-3)


def test_several_new_tokens_are_merged_after_the_kernel(kernel):
    args = _case(2, 4, 2, 2, 3, 40, 16, 6, 10, seed=6, padded=True)
    own_k, own_v = _own(args, 3, seed=7)
    mask = torch.ones(3, 3, dtype=torch.bool).tril().repeat(2, 1, 1, 1)
    mask[1, 0, 2, 0] = False
    want = merge_partial_attention(*reference_latent_attention(*args), *exact_attention_with_lse(args[0], own_k, own_v, mask))
    out, lse = cpu.cpu_latent_attention(kernel, *args, rope_tables=_tables(args), own=(own_k, own_v, mask))
    torch.testing.assert_close(out, want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, want[1], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_latents_are_read_in_the_caches_head_major_layout(kernel, dtype):
    """LLACache stores (B, groups, S, r) and hands out the (B, S, groups, r) view: strided reads. In
    float32 a tile's rows are read where they lie; V's last vector per row runs into the next row
    (r_v 40), except at the storage's end (the last task's last tile is gathered)."""
    q, ck, cv, *rest = _case(2, 4, 4, 4, 1, 60, 16, 24, 40, seed=8)
    stored_k, stored_v = ck.transpose(1, 2).contiguous().to(dtype), cv.transpose(1, 2).contiguous().to(dtype)
    view_k, view_v = stored_k.transpose(1, 2), stored_v.transpose(1, 2)
    assert not view_k.is_contiguous()
    out, lse = latent_attention(q, view_k, view_v, *rest)
    ref_out, ref_lse = reference_latent_attention(q, view_k.contiguous(), view_v.contiguous(), *rest)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-6, atol=1e-5)


def test_decoders_kept_as_rows_along_d_are_read_in_place(kernel):
    """LLACache keeps a CPU decoder as a (H_kv, d, r) view of (H_kv, r, d) rows: read where it lies,
    the same result, bit for bit, as the contiguous decoder the kernel transposes itself, and as
    a float64 or otherwise strided one."""
    q, ck, cv, up_k, mu_k, up_v, mu_v, *rest = _case(2, 4, 2, 2, 1, 45, 32, 24, 40, seed=11)
    rows = [u.transpose(1, 2).contiguous().transpose(1, 2) for u in (up_k, up_v)]
    assert rows[0].stride() == (32 * 24, 1, 32) and rows[0].data_ptr() != up_k.data_ptr()
    want = latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, *rest)
    for k, v in (rows, (up_k.double(), up_v.double()), (torch.cat([up_k, up_k], 2)[..., :24], torch.cat([up_v, up_v], 1)[:, :32])):
        got = latent_attention(q, ck, cv, k, mu_k, v, mu_v, *rest)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    torch.testing.assert_close(want[0], reference_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, *rest)[0],
                               rtol=1e-5, atol=1e-5)


def test_a_row_with_no_valid_key_weighs_nothing(kernel):
    args = list(_case(2, 2, 2, 2, 1, 30, 16, 6, 10, seed=9))
    args[8] = torch.ones(2, 30, dtype=torch.bool)
    args[8][1] = False                                     # row 1: every past slot is padding
    out, lse = latent_attention(*args)
    assert torch.isneginf(lse[1]).all() and torch.isfinite(lse[0]).all()
    own_k, own_v = _own(args, 1, seed=10)
    out, lse = latent_attention(*args, own=(own_k, own_v, None))
    torch.testing.assert_close(out[1], own_v[1].float(), rtol=1e-6, atol=1e-6)   # only itself to attend to
    want = merge_partial_attention(*reference_latent_attention(*args), *exact_attention_with_lse(args[0], own_k, own_v, None))
    torch.testing.assert_close(out[0], want[0][0], rtol=1e-5, atol=1e-5)


def test_unsupported_layouts_and_bad_shapes_are_errors(kernel):
    """The kernel checks its inputs itself (the Python wrapper no longer does): ValueErrors, named."""
    q, ck, cv, up_k, mu_k, up_v, mu_v, positions, _ = _case(1, 4, 4, 2, 1, 8, 16, 4, 4)   # 2 groups for 4 heads
    tables = _tables((q, ck, cv, up_k, mu_k, up_v, mu_v, positions))
    with pytest.raises(ValueError, match="latent groups"):
        latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, rope_tables=tables)
    args = _case(1, 2, 2, 2, 1, 8, 16, 4, 4)
    q, ck, cv, up_k, mu_k, up_v, mu_v, positions, _ = args
    with pytest.raises(ValueError, match="rope_tables"):
        latent_attention(*args[:8], rope_tables=tuple(t[:, :, 1:] for t in tables))
    with pytest.raises(ValueError, match="positions"):
        latent_attention(*args[:7], positions[:, 1:])
    with pytest.raises(ValueError, match="group over"):
        latent_attention(q[:, :1], *args[1:8])
    with pytest.raises(ValueError, match="decoder rows"):
        latent_attention(q, ck, cv, up_k, mu_k[:, 1:], up_v, mu_v, positions)
    with pytest.raises(ValueError, match="does not fit"):
        latent_attention(q, ck[:, :, :, 1:], cv, up_k, mu_k, up_v, mu_v, positions, rope_tables=tables)
    with pytest.raises(ValueError, match="key_valid"):
        latent_attention(*args[:8], torch.ones(1, 8))
    own_k, own_v = _own(args, 1)
    with pytest.raises(ValueError, match="own token"):
        latent_attention(*args, own=(own_k[:, :1], own_v, None))


def test_kernel_choice_and_a_failed_build(monkeypatch):
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "torch")
    assert cpu_kernels.extension() is None and cpu_kernels.implementation() == "torch"
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "fast")
    with pytest.raises(LoopKVError, match="LOOPKV_CPU_KERNEL"):
        cpu_kernels.extension()
    monkeypatch.setattr(cpu_kernels, "_state", {})

    def no_compiler():
        raise RuntimeError("g++: not found")

    monkeypatch.setattr(cpu_kernels, "_build", no_compiler)
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "cpp")
    with pytest.raises(LoopKVError, match="could not be built.*g\\+\\+"):
        cpu_kernels.extension()
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "auto")
    assert cpu_kernels.extension() is None                         # warned once, serving goes on on the torch path
    args = _case(1, 2, 2, 2, 1, 20, 16, 6, 10)
    torch.testing.assert_close(latent_attention(*args)[0], reference_latent_attention(*args)[0], rtol=1e-4, atol=1e-4)


def _tables(args):
    from loopkv.models.rope import Rotary

    return Rotary(args[0].shape[-1], 10000.0).cos_sin(args[7], torch.float32)


def test_a_lock_left_in_the_kernels_build_directory_is_not_waited_on(kernel, monkeypatch):
    """A build killed mid-compile leaves torch's lock file in the directory; torch would wait on it
    forever. (A CI run stopped for 80 minutes in the first test that built the kernel; a stale lock
    is one way that happens, a hung compiler another, which the build's time limit covers.)"""
    where = cpu_kernels.build_dir()
    assert (where / cpu_kernels.BUILT).exists()                    # the build process finished and said so
    (where / "lock").write_text("")
    monkeypatch.setattr(cpu_kernels, "_state", {})
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", "cpp")
    assert cpu_kernels.extension().simd_level() == kernel.simd_level()
    assert not (where / "lock").exists()


@pytest.mark.parametrize("implementation", ["cpp", "torch"])
def test_rope_rows_read_by_position_from_one_table(kernel, implementation, monkeypatch):
    """rope_table: (P, d) rows indexed by each key's position, one table for every batch row (the
    cache's); equal to per-key tables, and a position past the table is an error, not a stray read."""
    from loopkv.models.rope import Rotary

    monkeypatch.setenv("LOOPKV_CPU_KERNEL", implementation)
    args = _case(2, 4, 2, 2, 1, 30, 32, 6, 10, seed=12, offset=70, padded=True)
    positions = args[7]
    cos, sin = Rotary(32, 10000.0).cos_sin(torch.arange(int(positions.max()) + 5)[None], torch.float32)
    table = (cos[0, 0], sin[0, 0])
    want = reference_latent_attention(*args)
    got = latent_attention(*args, rope_table=table)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=1e-6, atol=1e-5)
    if implementation == "cpp":
        with pytest.raises(ValueError, match="rope_table has"):
            latent_attention(*args, rope_table=tuple(t[:int(positions.max())] for t in table))
        with pytest.raises(ValueError, match="positions must be"):
            latent_attention(*args[:7], positions.int(), args[8], rope_table=table)
