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
