"""Linear latent codecs for a token's K/V, SVD-initialised from calibration moments.

A token's pre-RoPE K (or V) across the model is a tensor over the axes (layer D, head H, loop T,
dim d_head). A codec layout says which axes are concatenated into one vector x and which index
separate codecs ("groups"):

    LLA       groups (layer, head)  x = [loop, dim]         width T*d_head   (the paper's codec)
    LLA-2D    groups (layer,)       x = [head, loop, dim]   width H*T*d_head
    mla_head  groups (layer, loop)  x = [head, dim]         width H*d_head   (head-axis baseline)

Per group and per kind (K, V): c = (x - mu) W_down (rank r), x_hat = c W_up^T + mu. W_up's rows
for loop t are the paper's W_up,t, so one loop can be decoded alone.
"""
from __future__ import annotations

import math

import torch
from torch import nn

AXIS_ORDER = ("layer", "head", "loop", "dim")
KINDS = ("k", "v")
LAYOUTS = {"per_head": ("layer", "head"), "joint_heads": ("layer",), "per_loop": ("layer", "loop")}


def model_sizes(config) -> dict[str, int]:
    """The axis sizes of a model's K/V, in a codec's terms."""
    return {"layer": config.num_hidden_layers, "head": config.num_key_value_heads,
            "loop": config.total_ut_steps, "dim": config.head_dim}


def concat_axes(groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(a for a in AXIS_ORDER if a not in groups)


def to_vectors(x: torch.Tensor, groups: tuple[str, ...]) -> torch.Tensor:
    """(..., D, H, T, dh) -> (..., G, X): one vector per codec group."""
    lead = x.ndim - 4
    order = [lead + AXIS_ORDER.index(a) for a in groups + concat_axes(groups)]
    moved = x.permute(*range(lead), *order)
    n_groups = math.prod(moved.shape[lead:lead + len(groups)])
    return moved.reshape(*x.shape[:lead], n_groups, -1)


def from_vectors(vec: torch.Tensor, groups: tuple[str, ...], sizes: dict[str, int]) -> torch.Tensor:
    """Inverse of to_vectors."""
    lead = vec.ndim - 2
    named = groups + concat_axes(groups)
    unflat = vec.reshape(*vec.shape[:lead], *(sizes[a] for a in named))
    order = [lead + named.index(a) for a in AXIS_ORDER]
    return unflat.permute(*range(lead), *order)


class LatentCodec(nn.Module):
    def __init__(self, sizes: dict[str, int], groups: tuple[str, ...], ranks: dict[str, int]):
        super().__init__()
        if tuple(groups) not in LAYOUTS.values():
            raise ValueError(f"groups must be one of {sorted(LAYOUTS.values())}, got {groups}")
        self.sizes = dict(sizes)
        self.groups = tuple(groups)
        self.concat = concat_axes(self.groups)
        self.num_groups = math.prod(sizes[a] for a in self.groups)
        self.width = math.prod(sizes[a] for a in self.concat)
        self.ranks = dict(ranks)
        for kind in KINDS:
            r = ranks[kind]
            if not 1 <= r <= self.width:
                raise ValueError(f"rank_{kind} must be in [1, {self.width}], got {r}")
            self.register_parameter(f"mu_{kind}", nn.Parameter(torch.zeros(self.num_groups, self.width)))
            self.register_parameter(f"down_{kind}", nn.Parameter(torch.zeros(self.num_groups, self.width, r)))
            self.register_parameter(f"up_{kind}", nn.Parameter(torch.zeros(self.num_groups, self.width, r)))

    # -- layout ---------------------------------------------------------------------------
    def to_vectors(self, x: torch.Tensor) -> torch.Tensor:
        return to_vectors(x, self.groups)

    def from_vectors(self, vec: torch.Tensor) -> torch.Tensor:
        return from_vectors(vec, self.groups, self.sizes)

    def loop_rows(self, loop: int) -> torch.Tensor:
        """Indices into the width of the entries belonging to `loop` (the rows of W_up,t); all rows
        when the loop indexes the groups instead."""
        if "loop" not in self.concat:
            return torch.arange(self.width)
        shape = [self.sizes[a] for a in self.concat]
        index = torch.arange(self.width).reshape(shape)
        return index.select(self.concat.index("loop"), loop).reshape(-1)

    # -- maths ------------------------------------------------------------------------------
    def params(self, kind: str):
        return getattr(self, f"mu_{kind}"), getattr(self, f"down_{kind}"), getattr(self, f"up_{kind}")

    def encode(self, kind: str, vec: torch.Tensor, groups: slice | None = None) -> torch.Tensor:
        """(..., G, width) -> (..., G, r) for the selected groups."""
        mu, down, _ = self.params(kind)
        groups = groups if groups is not None else slice(None)
        return torch.einsum("...gx,gxr->...gr", vec - mu[groups], down[groups])

    def decode(self, kind: str, latent: torch.Tensor, groups: slice | None = None,
               rows: torch.Tensor | None = None) -> torch.Tensor:
        """(..., G, r) -> (..., G, width) or only `rows` of the width."""
        mu, _, up = self.params(kind)
        groups = groups if groups is not None else slice(None)
        mu, up = mu[groups], up[groups]
        if rows is not None:
            mu, up = mu[:, rows], up[:, rows]
        return torch.einsum("...gr,gxr->...gx", latent, up) + mu

    def bytes_per_token(self, dtype: torch.dtype) -> int:
        """Persistent latent bytes per token: groups * (r_k + r_v) values."""
        element = torch.tensor([], dtype=dtype).element_size()
        return self.num_groups * (self.ranks["k"] + self.ranks["v"]) * element

    # -- initialisation ---------------------------------------------------------------------
    INITS = ("svd", "svd_loop1", "random")   # LLA Table 10: the recipe's SVD init and its two ablations

    @torch.no_grad()
    def initialise(self, init: str, mean: dict[str, torch.Tensor], covariance: dict[str, torch.Tensor],
                   seed: int = 0) -> None:
        """The codec's starting point (LLA Table 10), every one with mu = the calibration mean:
        svd: the top-r principal directions of the whole cross-loop vector (the recipe);
        svd_loop1: loop 1's subspace for every loop: the top-r eigenvectors of diag(C_11, ..., C_11),
        loop 1's covariance standing in for every loop's with no cross-loop terms (directions e_t x u_j,
        loop 1's eigenvalue order, loops in order within a tie; only where the vector spans the loops);
        random: seeded orthonormal directions (QR of a Gaussian), the same for W_down and W_up."""
        if init not in self.INITS:
            raise ValueError(f"init must be one of {self.INITS}, got {init!r}")
        if init == "svd_loop1" and "loop" not in self.concat:
            raise ValueError(f"svd_loop1 needs the loops inside the codec's vector; this codec's is {self.concat}")
        if init == "random":
            generator = torch.Generator().manual_seed(seed)
            directions = {}
            for kind in KINDS:
                gauss = torch.randn(self.num_groups, self.width, self.ranks[kind], generator=generator, dtype=torch.float64)
                directions[kind] = torch.linalg.qr(gauss).Q
            self._set(mean, directions)
        elif init == "svd_loop1":
            self._set(mean, {kind: self._loop1_directions(covariance[kind], self.ranks[kind]) for kind in KINDS})
        else:
            self.init_from_moments(mean, covariance)

    def _loop1_directions(self, covariance: torch.Tensor, rank: int) -> torch.Tensor:
        """(G, width, rank): loop 1's top eigenvectors placed at every loop's rows, in eigenvalue order."""
        rows = [self.loop_rows(t) for t in range(self.sizes["loop"])]
        first = covariance.double()[:, rows[0]][:, :, rows[0]]                  # (G, d, d) = C_11
        evecs = torch.linalg.eigh(first)[1].flip(-1)                            # descending eigenvalues
        out = torch.zeros(self.num_groups, self.width, rank, dtype=torch.float64)
        for column in range(rank):
            j, t = divmod(column, len(rows))
            out[:, rows[t], column] = evecs[:, :, j]
        return out

    @torch.no_grad()
    def _set(self, mean: dict[str, torch.Tensor], directions: dict[str, torch.Tensor]) -> None:
        for kind in KINDS:
            mu, down, up = self.params(kind)
            mu.copy_(mean[kind].to(mu.dtype))
            down.copy_(directions[kind].to(down.dtype))
            up.copy_(directions[kind].to(up.dtype))

    @torch.no_grad()
    def init_from_moments(self, mean: dict[str, torch.Tensor], covariance: dict[str, torch.Tensor]) -> None:
        """SVD initialisation: mu = calibration mean; W_down = W_up = the top-r principal directions
        of the centred calibration vectors (the top right singular vectors of the centred data
        matrix = the top eigenvectors of its covariance). mean[kind]: (G, width),
        covariance[kind]: (G, width, width), in this codec's layout."""
        for kind in KINDS:
            mu, down, up = self.params(kind)
            evals, evecs = torch.linalg.eigh(covariance[kind].double())
            top = evecs.flip(-1)[..., : self.ranks[kind]]     # descending eigenvalues
            mu.copy_(mean[kind].to(mu.dtype))
            down.copy_(top.to(down.dtype))
            up.copy_(top.to(up.dtype))
