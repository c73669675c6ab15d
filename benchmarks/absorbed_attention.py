"""Decode-step attention of one (loop, layer) over a long context, three ways, timed interleaved in
one run with random weights at a model's shapes (LLA Table 13's protocol; not end-to-end serving):

    teacher    exact attention over the stored post-RoPE K/V (B, H, S, d_head)
    lla fused  full-RoPE LLA's fused read (kernels/latent_attention.py: K rebuilt per tile, V absorbed)
    absorbed   decoupled-RoPE LLA's read (kernels/absorbed_attention.py: query folded into K's decoder,
               scores and values in latent space, O(r_k + d_rope + r_v) per key)

each at the same cache budget (LLA r_k/r_v; the decoupled codec's r_k + d_rope + r_v equal to it).
It first checks the absorbed read against reconstruct-then-attend at the benchmark's shape.

    python benchmarks/absorbed_attention.py [--contexts 4096 16384] [--heads 16] [--head-dim 128]
        [--loops 4] [--ratio 4] [--d-rope 64] [--device cpu|cuda] [--repeats 20]

Prints median milliseconds per call and the ratios.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from loopkv.kernels.absorbed_attention import absorbed_attention
from loopkv.kernels.latent_attention import latent_attention
from loopkv.models.rope import Rotary, rope_dims


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--loops", type=int, default=4)
    ap.add_argument("--ratio", type=float, default=4.0)
    ap.add_argument("--k-share", type=float, default=0.375)
    ap.add_argument("--d-rope", type=int, default=64)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    device, dtype = torch.device(args.device), torch.bfloat16 if args.device == "cuda" else torch.float32
    b, h, d, t = args.batch, args.heads, args.head_dim, args.loops
    budget = round(2 * t * d / args.ratio)                       # values per (layer, head) and token
    r_k = round(budget * args.k_share)
    r_v = budget - r_k
    rest = budget - args.d_rope
    dr_k = round(rest * args.k_share)
    dr_v = rest - dr_k
    rotated, content = rope_dims(d, args.d_rope)
    print(f"device {device}, {dtype}; B={b} H={h} d_head={d} T={t}, {args.ratio:g}x: LLA r_k/r_v {r_k}/{r_v}; "
          f"decoupled r_k/d_rope/r_v {dr_k}/{args.d_rope}/{dr_v}")
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=g)).to(device=device, dtype=dtype)

    print(f"{'context':>8} {'teacher ms':>11} {'lla fused ms':>13} {'absorbed ms':>12} "
          f"{'absorbed/teacher':>17} {'absorbed/lla':>13}")
    for s in args.contexts:
        q = rand(b, h, 1, d)
        keys, values = rand(b, h, s, d), rand(b, h, s, d)
        positions = torch.arange(s, device=device)[None].expand(b, -1)
        ck, cv = rand(b, s, h, r_k), rand(b, s, h, r_v)
        up_k, mu_k = rand(h, d, r_k, scale=r_k ** -0.5), rand(h, d, scale=0.1)
        up_v, mu_v = rand(h, d, r_v, scale=r_v ** -0.5), rand(h, d, scale=0.1)
        key_lat, val_lat = rand(b, h, s, dr_k + args.d_rope), rand(b, h, s, dr_v)
        dup_k, dmu_k = rand(h, d - args.d_rope, dr_k, scale=dr_k ** -0.5), rand(h, d - args.d_rope, scale=0.1)
        dup_v, dmu_v = rand(h, d, dr_v, scale=dr_v ** -0.5), rand(h, d, scale=0.1)
        rope_table = Rotary(d, 1e6).cos_sin(torch.arange(s, device=device)[None], torch.float32)
        rope_table = (rope_table[0][0, 0], rope_table[1][0, 0])
        rot, con = rotated.to(device), content.to(device)

        def teacher():
            return torch.nn.functional.scaled_dot_product_attention(q, keys, values)

        def lla_fused():
            return latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, None, 1e6, rope_table=rope_table)[0]

        def absorbed():
            q_c = q[..., con].float()
            folded = torch.cat([torch.einsum("bhlc,hcr->bhlr", q_c, dup_k.float()), q[..., rot].float()], dim=-1)
            bias = torch.einsum("bhlc,hc->bhl", q_c, dmu_k.float())
            return absorbed_attention(folded, bias, key_lat, val_lat, dup_v, dmu_v, None, d ** -0.5)[0]

        # the absorbed read against reconstruct-then-attend, at this shape (float32)
        k_full = torch.zeros(b, h, s, d, device=device)
        k_full[..., con] = key_lat[..., :dr_k].float() @ dup_k.float().transpose(1, 2)[None] + dmu_k.float()[None, :, None]
        k_full[..., rot] = key_lat[..., dr_k:].float()
        v_full = val_lat.float() @ dup_v.float().transpose(1, 2)[None] + dmu_v.float()[None, :, None]
        want = torch.softmax(q.float() @ k_full.transpose(-1, -2) / math.sqrt(d), -1) @ v_full
        err = float((absorbed() - want).abs().max())
        assert err < 1e-2 * float(want.abs().max()) + 1e-3, f"absorbed read differs from reconstruct-then-attend: {err}"
        times = {"teacher": [], "lla": [], "absorbed": []}
        with torch.no_grad():
            for fn in (teacher, lla_fused, absorbed):   # warm-up (kernel builds, caches)
                fn()
            for _ in range(args.repeats):
                for name, fn in (("teacher", teacher), ("lla", lla_fused), ("absorbed", absorbed)):
                    _sync(device)
                    start = time.perf_counter()
                    fn()
                    _sync(device)
                    times[name].append(1e3 * (time.perf_counter() - start))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{s:>8} {med['teacher']:>11.3f} {med['lla']:>13.3f} {med['absorbed']:>12.3f} "
              f"{med['absorbed'] / med['teacher']:>17.2f} {med['absorbed'] / med['lla']:>13.2f}")


if __name__ == "__main__":
    main()
