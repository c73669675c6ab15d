"""LLA Table 10's codec initialisations (LatentCodec.initialise): the recipe's SVD init, loop 1's
subspace for every loop, and random directions; each differs from the recipe only as stated (the
mean is the calibration mean in all three)."""
import numpy as np
import pytest
import torch

from loopkv.cache.latent_codec import LAYOUTS, LatentCodec

SIZES = {"layer": 2, "head": 2, "loop": 3, "dim": 4}   # per_head vectors: width T * d = 12, loop-major


def _moments(seed=0):
    g = torch.Generator().manual_seed(seed)
    groups, width = 4, 12
    mean = {k: torch.randn(groups, width, generator=g, dtype=torch.float64) for k in ("k", "v")}
    cov = {}
    for k in ("k", "v"):
        a = torch.randn(groups, width, 2 * width, generator=g, dtype=torch.float64)
        cov[k] = a @ a.transpose(1, 2) / (2 * width)
    return mean, cov


def _codec(rank_k=6, rank_v=9):
    return LatentCodec(SIZES, LAYOUTS["per_head"], {"k": rank_k, "v": rank_v}).double()


def _projector(w: torch.Tensor) -> np.ndarray:
    q = np.linalg.qr(w.detach().numpy())[0]
    return q @ q.T


def test_svd_is_the_recipe_unchanged():
    mean, cov = _moments()
    a, b = _codec(), _codec()
    a.initialise("svd", mean, cov)
    b.init_from_moments(mean, cov)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_loop1_init_places_loop_1s_eigenvectors_at_every_loop_in_its_eigenvalue_order():
    mean, cov = _moments()
    codec = _codec()
    codec.initialise("svd_loop1", mean, cov)
    for kind, rank in (("k", 6), ("v", 9)):
        mu, down, up = codec.params(kind)
        assert torch.equal(mu, mean[kind]) and torch.equal(down, up)
        for g in range(4):
            c11 = cov[kind][g, :4, :4].numpy()                    # loop 1's rows (loop-major vectors)
            values, vectors = np.linalg.eigh(c11)
            top = vectors[:, ::-1]
            for column in range(rank):
                j, t = divmod(column, 3)                          # eigenvector j, at loop t
                expected = np.zeros(12)
                expected[4 * t:4 * t + 4] = top[:, j]
                got = down[g, :, column].detach().numpy()
                assert np.allclose(got, expected) or np.allclose(got, -expected), (kind, g, column)


def test_loop1_init_reads_loop_1s_covariance_only_and_spans_svds_subspace_when_loops_are_alike():
    mean, cov = _moments()
    a, b = _codec(), _codec()
    a.initialise("svd_loop1", mean, cov)
    other = {k: v.clone() for k, v in cov.items()}
    for k in other:
        other[k][:, 4:, :] *= 3.0                                 # every block but loop 1's changes
        other[k][:, :, 4:] *= 3.0
    b.initialise("svd_loop1", mean, other)
    assert all(torch.allclose(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    # loops independent and alike (cov = diag(C11, C11, C11)): the recipe's top 6 = 2 directions x 3 loops
    alike = {k: torch.block_diag(*[v[0, :4, :4]] * 3)[None].repeat(4, 1, 1) for k, v in cov.items()}
    svd, loop1 = _codec(6, 9), _codec(6, 9)
    svd.initialise("svd", mean, alike)
    loop1.initialise("svd_loop1", mean, alike)
    for kind in ("k", "v"):
        assert np.allclose(_projector(svd.params(kind)[1][0]), _projector(loop1.params(kind)[1][0]), atol=1e-8)


def test_random_init_is_seeded_orthonormal_and_not_the_svd_subspace():
    mean, cov = _moments()
    a, b, c, svd = _codec(), _codec(), _codec(), _codec()
    a.initialise("random", mean, cov, seed=3)
    b.initialise("random", mean, cov, seed=3)
    c.initialise("random", mean, cov, seed=4)
    svd.initialise("svd", mean, cov)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.params("k")[1], c.params("k")[1])
    for kind, rank in (("k", 6), ("v", 9)):
        mu, down, up = a.params(kind)
        assert torch.equal(mu, mean[kind]) and torch.equal(down, up)
        gram = down.transpose(1, 2) @ down
        assert torch.allclose(gram, torch.eye(rank, dtype=torch.float64).expand_as(gram), atol=1e-10)
        # not the principal subspace: the projectors differ by far more than round-off
        assert np.abs(_projector(down[0]) - _projector(svd.params(kind)[1][0])).max() > 0.1


def test_an_unknown_init_or_loop1_without_loops_in_the_vector_is_refused():
    mean, cov = _moments()
    with pytest.raises(ValueError, match="init must be one of"):
        _codec().initialise("pca", mean, cov)
    per_loop = LatentCodec(SIZES, LAYOUTS["per_loop"], {"k": 2, "v": 2}).double()
    with pytest.raises(ValueError, match="needs the loops inside"):
        per_loop.initialise("svd_loop1", {k: torch.zeros(12, 8) for k in ("k", "v")},
                            {k: torch.eye(8).repeat(12, 1, 1) for k in ("k", "v")})
