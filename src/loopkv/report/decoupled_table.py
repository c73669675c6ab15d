"""LLA Table 14: decoupled RoPE (lla_decoupled, the path whose K decoder folds into the query) beside
full-RoPE LLA, every codec distilled on Table 10's short schedule at its budget: the first row is
Table 10's recipe (full-RoPE LLA), then each decoupled_rope variant. A row reads its distillation
curve: the setting (ranks, d_rope, adapter), the schedule, the held-out two-pass KL and top-1
agreement at the init (step 0) and the best kept. The paper's values stand beside, matched by what a
variant is (the share of the head that keeps RoPE, the adapter, a longer schedule), never by name."""
from __future__ import annotations

from loopkv.errors import LoopKVError
from loopkv.report import tables
from loopkv.report.paper_values import TABLE14, TABLE14_SOURCE

SPEC = tables.TableSpec(
    columns=[("variant", "variant"), ("rope", "RoPE"), ("ranks", "r_k/d_rope/r_v"), ("adapter", "query\nadapter"),
             ("steps", "steps"), ("kl_init", "KL 2-pass\nat init"), ("kl_best", "KL 2-pass\nbest"),
             ("top1_best", "top-1 2-pass\nbest"), ("kl_vs_full", "KL / full\nRoPE's"),
             ("paper_kl", "paper KL"), ("paper_top1", "paper\ntop-1")],
    csv_extra=["paper_row", "d_rope", "head_dim_share", "best_step", "n_kl_tokens", "budget", "ratio"], width=15.0)


def paper_row(row: dict, base_steps: int):
    """The paper's row a variant is: full RoPE, or (share of the head kept rotated, adapter, longer)."""
    if row["d_rope"] is None:
        return "full_rope"
    key = (row["head_dim_share"], row["adapter"], row["steps"] > base_steps)
    return key if key in TABLE14 else None


def build_rows(curves: dict[str, dict]) -> list[dict]:
    """curves: variant -> its distill curve.json, in table order; the first is full-RoPE LLA (Table 10's
    recipe), the one every ratio is to. A decoupled curve states the model's head_dim: d_rope's share of
    it picks the paper's row."""
    rows = []
    for variant, curve in curves.items():
        heldout, kwargs = curve["curve"]["heldout"], curve["setting"]["kwargs"]
        if not heldout or heldout[0]["step"] != 0:
            raise LoopKVError(f"table14: {variant}'s curve has no held-out KL at step 0 (its init)")
        d_rope = kwargs.get("d_rope")
        head_dim = curve.get("head_dim")
        if d_rope is not None and not (isinstance(head_dim, int) and 0 < d_rope < head_dim):
            raise LoopKVError(f"table14: {variant}'s curve does not state a head_dim above its d_rope {d_rope} "
                              f"(got {head_dim!r}); re-run its distillation")
        rows.append({"variant": variant, "rope": "full" if d_rope is None else "decoupled",
                     "ranks": f"{kwargs['rank_k']}/{d_rope if d_rope is not None else '-'}/{kwargs['rank_v']}",
                     "d_rope": d_rope, "head_dim_share": None if d_rope is None else d_rope / head_dim,
                     "adapter": bool(kwargs.get("query_adapter", False)), "steps": curve["recipe"]["steps"],
                     "kl_init": heldout[0]["kl"], "kl_best": curve["best"]["kl"], "top1_best": curve["best"].get("top1"),
                     "best_step": curve["best"]["step"], "n_kl_tokens": heldout[0].get("n_tokens"),
                     "budget": curve["setting"]["budget"], "ratio": curve["setting"]["ratio"]})
    full = rows[0]
    if full["d_rope"] is not None or any(row["d_rope"] is None for row in rows[1:]):
        raise LoopKVError("table14: the first curve must be full-RoPE LLA's (Table 10's recipe), the others "
                          "decoupled-RoPE variants'")
    if any(row["budget"] != full["budget"] for row in rows):
        raise LoopKVError(f"table14: every row must be at full-RoPE LLA's budget {full['budget']}")
    for row in rows:
        key = paper_row(row, full["steps"])
        row["paper_row"] = key if isinstance(key, str) or key is None else "d{:g}_{}_{}".format(
            key[0], "adapter" if key[1] else "plain", "longer" if key[2] else "short")
        row["kl_vs_full"] = row["kl_best"] / full["kl_best"] if full["kl_best"] > 0 else None
        if key is not None:
            row["paper_kl"], row["paper_top1"] = TABLE14[key]["kl"], TABLE14[key]["top1"]
    return rows


def note(rows: list[dict]) -> str:
    full = rows[0]
    return (f"Every codec at {full['budget']} ({full['ratio']:g}x) distilled on Table 10's short schedule ({full['steps']} "
            f"steps; 'longer' rows a multiple of it) from its SVD init; held-out two-pass KL and top-1 agreement with "
            f"the teacher on {full['n_kl_tokens']} validation tokens, at the init (step 0) and the best kept. Decoupled "
            f"RoPE: each head's d_rope highest-frequency dims keep RoPE (one rotated slice per token, a learned mix of "
            f"its loops), the other dims carry no position in queries and keys alike (the model changes, which is what "
            f"the KL measures) and are stored as LLA's cross-loop latent; r_k + d_rope + r_v is LLA's per-head budget. "
            f"The query adapter is a learned map on the queries' content dims. Paper: {TABLE14_SOURCE}: full RoPE .059 "
            f"(top-1 about .95); d_rope 64 of 128 without adapter .55, with .34 (top-1 .84), longer .30 (.88); d_rope 32 "
            f"with adapter 1.04. Matched by the share of the head kept rotated, the adapter and a longer schedule. One "
            f"seed, no intervals (a KL over correlated tokens has no simple interval).")
