"""Latent-codec caches (the codec methods: LLA, LLA-2D, mla_head): SVD initialisation, latent reads,
byte accounting, read paths. Exactness at full rank is tests/cache/test_every_method.py's lossless check."""
import pytest
import torch

from loopkv.analysis.calibration import Calibration, capture_kv
from loopkv.cache import make_cache
from loopkv.cache.latent_codec import LAYOUTS, LatentCodec
from loopkv.cache.budget import LatentBudget
from loopkv.cache.registry import METHODS, codec_layouts, codec_methods, read_path_methods
from loopkv.cache.settings import served_read_path

METHOD_LAYOUT = codec_layouts()
# (method, read_path) of every method with a LatentCodec (lla_decoupled's codec has tests of its own);
# mla_head has no fused read (latent and full only)
LATENT_CODEC_METHODS = [m for m in codec_methods() if issubclass(METHODS[m], LatentBudget)]
CACHES = [(m, p) for m in LATENT_CODEC_METHODS for p in (METHODS[m].read_paths or (None,))]
FUSED_METHODS = [m for m in LATENT_CODEC_METHODS if "fused" in METHODS[m].read_paths]


def build(method, read_path, config, codec):
    kwargs = {} if read_path is None else {"read_path": read_path}
    return make_cache(method, config, codec=codec, **kwargs)


def sizes_of(config):
    return {"layer": config.num_hidden_layers, "head": config.num_key_value_heads,
            "loop": config.total_ut_steps, "dim": config.head_dim}


@pytest.fixture(scope="module")
def calibration(reference_model):
    torch.manual_seed(0)
    cal = Calibration(("per_head", "joint_heads", "per_loop"))
    tokens = torch.randint(3, 256, (6, 40))
    k, v = capture_kv(reference_model, tokens)
    cal.add(k.flatten(0, 1), v.flatten(0, 1), sample=torch.arange(0, 240, 3))
    return cal, k.flatten(0, 1), v.flatten(0, 1)


def make_codec(config, calibration, rank_k, rank_v, layout="per_head"):
    cal = calibration[0]
    codec = LatentCodec(sizes_of(config), LAYOUTS[layout], {"k": rank_k, "v": rank_v})
    codec.init_from_moments({kind: cal.moments[layout, kind].mean() for kind in "kv"},
                            {kind: cal.moments[layout, kind].covariance() for kind in "kv"})
    return codec


def test_svd_init_is_the_top_principal_subspace(reference_model, calibration):
    config = reference_model.config
    codec = make_codec(config, calibration, 5, 9)
    _, k, v = calibration
    for kind, x, r in (("k", k, 5), ("v", v, 9)):
        vec = codec.to_vectors(x).double()                          # (N, G, X)
        for g in range(codec.num_groups):
            data = vec[:, g]
            centred = data - data.mean(0)
            _, _, vh = torch.linalg.svd(centred, full_matrices=False)
            want = vh[:r].T @ vh[:r]                                 # projector onto the top-r subspace
            w = getattr(codec, f"down_{kind}")[g].double()
            torch.testing.assert_close(w @ w.T, want, atol=1e-6, rtol=0)
            torch.testing.assert_close(getattr(codec, f"mu_{kind}")[g].double(), data.mean(0), atol=1e-5, rtol=0)


def test_layout_round_trip(reference_model, calibration):
    _, k, _ = calibration
    codec = make_codec(reference_model.config, calibration, 4, 4)
    assert torch.equal(codec.from_vectors(codec.to_vectors(k)), k)


def test_latent_reads_decode_what_was_encoded(reference_model, calibration):
    """Past tokens are seen through decode(encode(x)) of their own K/V, rotated to their positions."""
    config = reference_model.config
    codec = make_codec(config, calibration, 3, 6)
    tokens = torch.randint(3, 256, (2, 7))
    cache = make_cache("lla", config, codec=codec)
    with torch.no_grad():
        reference_model(tokens, cache=cache)
        k, _ = capture_kv(reference_model, tokens)                   # exact K/V of the prompt
        want = codec.from_vectors(codec.decode("k", codec.encode("k", codec.to_vectors(k))))
        positions = torch.arange(7).expand(2, 7)
        for loop in range(config.total_ut_steps):
            for layer in range(config.num_hidden_layers):
                got, _ = cache._past(loop, layer)
                ref = cache.rope(positions, want[:, :, layer, :, loop].transpose(1, 2))
                torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("method, read_path", CACHES)
def test_bytes_per_token_match_formula_and_allocation(reference_model, calibration, method, read_path):
    config = reference_model.config
    rk, rv = 3, 6
    codec = make_codec(config, calibration, rk, rv, METHOD_LAYOUT[method])
    cache = build(method, read_path, config, codec)
    with torch.no_grad():
        reference_model(torch.randint(3, 256, (2, 9)), cache=cache)
        reference_model(torch.randint(3, 256, (2, 1)), cache=cache)
    D, H, T, d = 2, 4, 3, 16
    latents = {"per_head": D * H, "joint_heads": D, "per_loop": T * D}[METHOD_LAYOUT[method]] * (rk + rv)   # codecs
    formula = 2 * T * D * H * d * 4 if read_path == "full" else latents * 4   # fused stores latents
    assert cache.bytes_per_token(torch.float32) == formula
    assert cache.allocated_bytes() == formula * 2 * 10


@pytest.mark.parametrize("method, read_path", CACHES)
def test_append_stores_what_update_stores(reference_model, calibration, method, read_path):
    """The write half alone (capacity probes fill caches with it, without LLA's decode of the whole
    past at every call) keeps exactly the tensors the model's reads would have left."""
    codec = make_codec(reference_model.config, calibration, 3, 6, METHOD_LAYOUT[method])
    g = torch.Generator().manual_seed(0)
    forwards = [[(torch.randn(2, 4, n, 16, generator=g), torch.randn(2, 4, n, 16, generator=g)) for _ in range(6)]
                for n in (5, 3)]                     # two forwards, T * D = 6 (loop, layer) calls each
    stored = []
    for write in ("append", "update"):
        cache = build(method, read_path, reference_model.config, codec)
        for kv in forwards:
            positions = (cache.get_seq_length() + torch.arange(kv[0][0].shape[2])).expand(2, -1)
            cache.begin_forward(positions)
            for i, (k, v) in enumerate(kv):
                getattr(cache, write)(i // cache.num_layers, i % cache.num_layers, positions, k, v)
            cache.end_forward()
        stored.append(cache.cached_tensors())
    assert len(stored[0]) == len(stored[1]) > 0
    for a, b in zip(*stored):
        assert torch.equal(a, b)


def test_ouro_1p4b_lla_4x_is_192_kib_per_token_in_bf16():
    sizes = {"layer": 24, "head": 16, "loop": 4, "dim": 128}
    codec = LatentCodec(sizes, ("layer", "head"), {"k": 96, "v": 160}).to("meta")
    assert codec.bytes_per_token(torch.bfloat16) == 192 * 1024


def test_low_rank_mla_head_reads_decode_what_was_encoded(reference_model, calibration):
    config = reference_model.config
    codec = make_codec(config, calibration, 5, 7, "per_loop")
    tokens = torch.randint(3, 256, (2, 6))
    cache = make_cache("mla_head", config, codec=codec)
    with torch.no_grad():
        reference_model(tokens, cache=cache)
        k, _ = capture_kv(reference_model, tokens)
    want = codec.from_vectors(codec.decode("k", codec.encode("k", codec.to_vectors(k))))
    for loop in range(config.total_ut_steps):
        for layer in range(config.num_hidden_layers):
            group = slice(layer * config.total_ut_steps + loop, layer * config.total_ut_steps + loop + 1)
            got = cache._decode("k", group, cache.latents["k"][cache.entry(loop, layer)])
            torch.testing.assert_close(got, want[:, :, layer, :, loop].transpose(1, 2), atol=1e-5, rtol=0)


def test_a_codec_of_the_wrong_layout_or_size_is_rejected(reference_model, calibration):
    config = reference_model.config
    with pytest.raises(ValueError, match="groups"):
        make_cache("lla", config, codec=make_codec(config, calibration, 4, 4, "joint_heads"))
    other = LatentCodec({"layer": 2, "head": 4, "loop": 2, "dim": 16}, ("layer", "head"), {"k": 4, "v": 4})
    with pytest.raises(ValueError, match="sizes"):
        make_cache("lla", config, codec=other)


def test_bad_ranks_and_layouts_are_rejected():
    sizes = {"layer": 2, "head": 2, "loop": 2, "dim": 4}
    with pytest.raises(ValueError, match="rank_k"):
        LatentCodec(sizes, ("layer", "head"), {"k": 9, "v": 2})
    with pytest.raises(ValueError, match="groups"):
        LatentCodec(sizes, ("head",), {"k": 2, "v": 2})


@pytest.mark.parametrize("method", [m for m in read_path_methods() if m in LATENT_CODEC_METHODS])
@pytest.mark.parametrize("cpu_kernel", ["cpp", "torch"])    # the fused read's two CPU implementations
def test_latent_and_full_read_paths_give_the_same_logits(reference_model, calibration, method, cpu_kernel,
                                                         monkeypatch):
    """Both paths hand attention decode(encode(x)) rotated to the token's position: one stores it,
    the other recomputes it on every read. The fused read attends to the latents directly."""
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", cpu_kernel)
    config = reference_model.config
    codec = make_codec(config, calibration, 3, 6, METHOD_LAYOUT[method])
    tokens = torch.randint(3, 256, (2, 12))
    logits = {}
    for read_path in METHODS[method].read_paths:
        cache = build(method, read_path, config, codec)
        with torch.no_grad():
            pieces = [reference_model(tokens[:, :3], cache=cache).logits]
            for i in range(3, tokens.shape[1]):
                pieces.append(reference_model(tokens[:, i:i + 1], cache=cache).logits)
        logits[read_path] = torch.cat(pieces, 1)
    assert {"latent", "full"} <= set(logits)
    torch.testing.assert_close(logits["latent"], logits["full"], atol=1e-5, rtol=0)
    if "fused" in logits:
        torch.testing.assert_close(logits["fused"], logits["latent"], atol=1e-4, rtol=0)


def test_mla_heads_full_path_decodes_each_token_once_per_entry(reference_model, calibration, monkeypatch):
    """The latent path decodes an entry's whole history at each of a step's T*D reads; the full path
    decodes only the step's new token, once per entry, at the end of its forward."""
    config = reference_model.config
    codec = make_codec(config, calibration, 3, 6, METHOD_LAYOUT["mla_head"])
    tokens = torch.randint(3, 256, (1, 9))
    decoded_rows = []
    real_decode = codec.decode
    monkeypatch.setattr(codec, "decode", lambda kind, latent, *a: decoded_rows.append(latent.shape[1]) or
                        real_decode(kind, latent, *a))
    entries = config.total_ut_steps * config.num_hidden_layers
    for read_path, per_entry in (("latent", 8), ("full", 1)):   # the ninth token's step reads 8 past tokens
        cache = build("mla_head", read_path, config, codec)
        with torch.no_grad():
            reference_model(tokens[:, :8], cache=cache)
            decoded_rows.clear()
            reference_model(tokens[:, 8:], cache=cache)
        assert decoded_rows == [per_entry] * 2 * entries, read_path    # K and V of every (loop, layer)


def test_the_configured_read_path_is_served_where_the_method_has_it():
    assert served_read_path("lla", "fused") == "fused" and served_read_path("lla2d", "full") == "full"
    assert served_read_path("mla_head", "full") == "full"
    assert served_read_path("mla_head", "fused") == "latent"     # no fused read: its default path
    assert served_read_path("kv_quant", "full") is None and served_read_path("full", "latent") is None


@pytest.mark.parametrize("method", FUSED_METHODS)
@pytest.mark.parametrize("cpu_kernel", ["cpp", "torch"])
def test_fused_path_generates_left_padded_batches_like_the_latent_path(reference_model, calibration, method,
                                                                       cpu_kernel, monkeypatch):
    """Batched decode with left padding: the fused read (latents read in place, padded slots masked)
    continues every prompt as the reconstruct-on-read path does."""
    monkeypatch.setenv("LOOPKV_CPU_KERNEL", cpu_kernel)
    from loopkv.eval.generation import greedy_generate

    config = reference_model.config
    codec = make_codec(config, calibration, 3, 6, METHOD_LAYOUT[method])
    prompts = [[1, 5, 9, 33, 70], [1, 7, 7, 8, 9, 10, 11, 40, 2], [1, 22], [1, 3, 4, 5, 6, 7, 200]]
    out = {path: greedy_generate(reference_model, prompts, max_new_tokens=8, batch_size=4, eos_id=-1,
                                 cache_factory=lambda path=path: build(method, path, config, codec))
           for path in ("latent", "fused")}
    assert out["fused"] == out["latent"]


def test_fused_read_follows_a_codec_updated_in_place(reference_model, calibration):
    """The fused read gathers each loop's decoder rows once and reuses them; a codec changed in place
    between forwards (an optimizer step) must be re-gathered, not served stale."""
    config = reference_model.config
    codec = make_codec(config, calibration, 3, 6)
    tokens = torch.randint(3, 256, (2, 6))
    original = {k: v.clone() for k, v in codec.state_dict().items()}
    logits = {}
    for path in ("fused", "latent"):    # latent: decodes with the current weights at every read
        codec.load_state_dict(original)
        cache = build("lla", path, config, codec)
        with torch.no_grad():
            reference_model(tokens[:, :4], cache=cache)
            reference_model(tokens[:, 4:5], cache=cache)       # the fused cache has gathered its decoders
            codec.up_k.mul_(1.5)
            codec.mu_v.add_(0.25)
            logits[path] = reference_model(tokens[:, 5:6], cache=cache).logits
    torch.testing.assert_close(logits["fused"], logits["latent"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("method", FUSED_METHODS)
@pytest.mark.parametrize("length", [1, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_cpu_encode_kernel_equals_the_python_encode_bit_for_bit(reference_model, calibration, method, length,
                                                                    dtype, monkeypatch):
    """Serving encodes through one C++ call (x - mu in one pass, the same bmm); training through torch
    here. A latent must not depend on which ran: a model served after distillation reads what it was
    taught. The loops' K arrive as strided views (the model's head transpose), as in serving."""
    config = reference_model.config
    codec = make_codec(config, calibration, 3, 6, METHOD_LAYOUT[method]).to(dtype)
    g = torch.Generator().manual_seed(11)
    H, dh = config.num_key_value_heads, config.head_dim
    loops = {kind: [torch.randn(2, length, H, dh, generator=g).to(dtype).transpose(1, 2)
                    for _ in range(config.total_ut_steps)] for kind in "kv"}
    latents = {}
    for cpu_kernel in ("cpp", "torch"):
        monkeypatch.setenv("LOOPKV_CPU_KERNEL", cpu_kernel)
        cache = build(method, "fused", config, codec)
        with torch.no_grad():
            latents[cpu_kernel] = cache._latents(1, loops["k"], loops["v"])
    groups = {"per_head": config.num_key_value_heads, "joint_heads": 1}[METHOD_LAYOUT[method]]   # per head or joined
    for kind, rank in (("k", 3), ("v", 6)):
        assert latents["cpp"][kind].shape == (2, groups, length, rank)
        assert torch.equal(latents["cpp"][kind], latents["torch"][kind])
    # and the definition: the codec's own encode of the tokens' vectors
    token = torch.stack(loops["k"], dim=-2).transpose(1, 2).unsqueeze(2)            # (B, L, 1 layer, H, T, dh)
    per_layer = codec.num_groups // config.num_hidden_layers
    want = codec.float().encode("k", codec.to_vectors(token.float()), slice(per_layer, 2 * per_layer)).detach()
    tolerance = 1e-5 if dtype == torch.float32 else 5e-2
    torch.testing.assert_close(latents["cpp"]["k"].transpose(1, 2).float(), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("family", ["ouro", "huginn"])   # rotate-half and interleaved RoPE
@pytest.mark.parametrize("cpu_kernel", ["cpp", "torch"])
def test_a_fused_read_is_the_latent_read_per_call_in_either_rope_layout(family, cpu_kernel, monkeypatch):
    """Every attention call of a prefill and a decode step, float64 inputs: the fused kernels (which
    rotate rotate-half) read an interleaved model's latents through a reordering of head dims, equal to
    decoding them; float32 round-off apart. Measured: 2.7e-7 in both layouts, 0.6 without the reordering."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from cache_helpers import random_codec
    from method_checks import compressed_setting, teacher
    from loopkv.cache.settings import cache_factory

    monkeypatch.setenv("LOOPKV_CPU_KERNEL", cpu_kernel)
    config = teacher(family=family).config
    setting = compressed_setting("lla", config)
    codec = random_codec(setting, config, 0, dtype=torch.float64)
    caches = {path: cache_factory(setting, config, codec, read_path=path)() for path in ("latent", "fused")}
    g = torch.Generator().manual_seed(0)
    shape = lambda n: (2, config.num_key_value_heads, n, config.head_dim)  # noqa: E731
    draw = lambda n: torch.randn(*shape(n), generator=g, dtype=torch.float64)  # noqa: E731
    for n, start in ((5, 0), (1, 5)):   # a prefill, then a decode step reading the prefill's latents
        positions = torch.arange(start, start + n)[None].expand(2, n)
        mask = None if start == 0 else torch.ones(2, 1, n, start + n, dtype=torch.bool)
        calls = [(t, d, draw(n), draw(n), draw(n)) for t in range(config.total_ut_steps)
                 for d in range(config.num_hidden_layers)]
        out = {}
        for path, cache in caches.items():
            cache.begin_forward(positions)
            out[path] = torch.stack([cache.attend(t, d, positions, q, k, v, mask) for t, d, q, k, v in calls])
            cache.end_forward()
        torch.testing.assert_close(out["fused"], out["latent"], atol=2e-6, rtol=0)
