"""Calibration moments equal the statistics of the raw captured K/V; capture equals the cache's view."""
import torch

from loopkv.analysis.calibration import Calibration, Moments, capture_kv, run_calibration
from loopkv.cache.latent_codec import to_vectors


def test_streaming_moments_equal_whole_data_statistics():
    torch.manual_seed(0)
    data = torch.randn(100, 3, 5).double()
    m = Moments()
    m.add(data[:37])
    m.add(data[37:])
    torch.testing.assert_close(m.mean(), data.mean(0))
    centred = data - data.mean(0)
    want = torch.einsum("ngx,ngy->gxy", centred, centred) / 100
    torch.testing.assert_close(m.covariance(), want)


def test_capture_has_every_loop_layer_head(reference_model):
    tokens = torch.randint(3, 256, (2, 6))
    k, v = capture_kv(reference_model, tokens)
    assert k.shape == v.shape == (2, 6, 2, 4, 3, 16)     # (B, L, D, H, T, dh)
    # loop 0, layer 0 keys are the k_proj of the first normed embedding: recompute them
    layer = reference_model.model.layers[0]
    with torch.no_grad():
        h = layer.input_layernorm(reference_model.model.embed_tokens(tokens))
        k0 = layer.self_attn.k_proj(h).view(2, 6, 4, 16)
    torch.testing.assert_close(k[:, :, 0, :, 0], k0, atol=1e-6, rtol=0)


def test_run_calibration_counts_and_samples(reference_model):
    rows = torch.randint(3, 256, (5, 8))
    cal = run_calibration(reference_model, rows, batch_size=2, layouts=("per_head", "joint_heads"),
                          sample_tokens=7, seed=3, progress=False)
    assert cal.moments["per_head", "k"].count == 40
    assert cal.moments["joint_heads", "v"].total.shape == (2, 4 * 3 * 16)
    assert cal.sample_tensor().shape == (2, 7, 2, 4, 3, 16)
    again = Calibration.from_state(cal.state())
    torch.testing.assert_close(again.moments["per_head", "v"].covariance(), cal.moments["per_head", "v"].covariance())
    k, _ = capture_kv(reference_model, rows)
    torch.testing.assert_close(cal.moments["per_head", "k"].mean(),
                               to_vectors(k.flatten(0, 1), ("layer", "head")).double().mean(0))


def test_huginn_capture_is_every_core_step_of_the_authors_states(huginn_reference_model, huginn_reference_dir):
    """Huginn's loop axis is the core's steps: step t's layer-0 keys are the fused projection's K rows
    (plus the k bias) of norm_1(adapter([state after step t-1, prelude output])), recomputed here from
    the states the authors' code produced (input_states at step 0). Prelude and coda are not captured."""
    import numpy as np

    from loopkv.models.huginn_checkpoint import SAFETENSORS
    from safetensors.numpy import load_file

    fixture = np.load(huginn_reference_dir / "expected.npz")
    weights = {k: torch.from_numpy(v) for k, v in load_file(huginn_reference_dir / SAFETENSORS).items()}
    tokens, start = torch.from_numpy(fixture["tokens"]), torch.from_numpy(fixture["input_states"])
    core, prelude = torch.from_numpy(fixture["core_states"]), torch.from_numpy(fixture["prelude_out"])
    k, v = capture_kv(huginn_reference_model, tokens, input_states=start)
    assert k.shape == v.shape == (2, 10, 2, 4, 4, 16)        # (B, L, R core layers, H, steps, dh)

    def rms(x, w):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    block = "transformer.core_block.0."
    for step in range(4):
        state = start if step == 0 else core[step - 1]
        x = torch.cat([state, prelude], dim=-1) @ weights["transformer.adapter.weight"].T
        kv_rows = rms(x, weights[block + "norm_1.weight"]) @ weights[block + "attn.Wqkv.weight"][64:].T
        want_k = kv_rows[..., :64].view(2, 10, 4, 16) + weights[block + "attn.qk_bias"][1, 0]
        want_v = kv_rows[..., 64:].view(2, 10, 4, 16)
        torch.testing.assert_close(k[:, :, 0, :, step], want_k, atol=2e-4, rtol=1e-4)
        torch.testing.assert_close(v[:, :, 0, :, step], want_v, atol=2e-4, rtol=1e-4)
