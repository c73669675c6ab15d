"""LLA Table 9: token eviction (attention sinks + a recent window) composed with KV methods. Each row
is one eviction.methods cell evaluated with its caches evicting (eviction-eval), beside the same cell
without eviction (Table 1's method-eval of it): arithmetic exact match both ways and the paired
difference on the same items, passkey and the streamed KL. Bytes are exact: the method's bytes per
held token, and what a context of `context` tokens holds (cache/eviction.py's held_slots: the sinks
and the window, kv_quant whole key groups), against the teacher's full cache of that context.
The paper's GSM8K under eviction stands beside, matched by method and per-token ratio."""
from __future__ import annotations

from loopkv.cache.eviction import held_slots
from loopkv.errors import LoopKVError
from loopkv.report import tables
from loopkv.report.paper_values import TABLE9, TABLE9_NO_EVICTION, TABLE9_SOURCE
from loopkv.report.table1 import versus_teacher

SPEC = tables.TableSpec(
    columns=[("method", "method"), ("budget", "budget"), ("ratio", "x fewer bytes\nper token"),
             ("held_tokens", "tokens held\nat context"), ("context_ratio", "x fewer bytes\nat context"),
             ("arith_em_plain", "arith EM\nno eviction"), ("arith_em", "arith EM\nevicting"),
             ("arith_em_vs_plain", "evicting -\nno eviction"), ("passkey_in_plain", "passkey\nno eviction"),
             ("passkey_in", "passkey\nevicting"), ("kl_plain", "KL streamed\nno eviction"),
             ("kl_streamed", "KL streamed\nevicting"), ("paper_gsm8k", "paper GSM8K\nevicting"),
             ("paper_gsm8k_plain", "paper GSM8K\nno eviction")],
    csv_extra=["sinks", "window", "granule", "context", "bytes_per_token", "teacher_bytes_per_token",
               "n_arith", "n_passkey_in", "n_kl_tokens"],
    proportions={"arith_em_plain": "n_arith", "arith_em": "n_arith", "passkey_in_plain": "n_passkey_in",
                 "passkey_in": "n_passkey_in"},
    own_intervals=("arith_em_vs_plain",), width=19.0)


def build_rows(evicted: list[dict], plain: list[dict], evicted_samples: list[dict], plain_samples: list[dict],
               passkey_train_max: int, context: int) -> list[dict]:
    """evicted / plain: eviction-eval and method-eval `metrics` of the same cells, in table order;
    their per-item samples likewise; context: the tokens at which the held bytes are counted."""
    if not len(evicted) == len(plain) == len(evicted_samples) == len(plain_samples):
        raise LoopKVError(f"table9: {len(evicted)} evicting cells, {len(plain)} plain ones, {len(evicted_samples)} "
                          f"and {len(plain_samples)} sample files: one of each per cell")
    rows = []
    for m, p, ms, ps in zip(evicted, plain, evicted_samples, plain_samples):
        if (m["method"], m["budget"]) != (p["method"], p["budget"]) or "eviction" not in m or "eviction" in p:
            raise LoopKVError(f"table9: an evicting cell ({m['method']} {m['budget']}) goes beside the same cell "
                              f"without eviction, got {p['method']} {p['budget']}")
        ev = m["eviction"]
        held = held_slots(context, ev["sinks"], ev["window"], ev["granule"])
        mine, theirs = tables.quality_fields(m, passkey_train_max), tables.quality_fields(p, passkey_train_max)
        diff = versus_teacher(ms, ps)   # the same items, evicting minus not
        ratio = m["setting"]["ratio"]
        paper = TABLE9.get((m["method"], round(ratio, 2)), {})
        rows.append({
            "method": m["method"], "budget": m["budget"], "ratio": ratio, "sinks": ev["sinks"],
            "window": ev["window"], "granule": ev["granule"], "context": context, "held_tokens": held,
            "bytes_per_token": m["bytes_per_token"], "teacher_bytes_per_token": m["teacher_bytes_per_token"],
            "context_ratio": m["teacher_bytes_per_token"] * context / (m["bytes_per_token"] * held),
            "arith_em": mine["arith_em"], "arith_em_plain": theirs["arith_em"], "n_arith": mine["n_arith"],
            "arith_em_vs_plain": diff.value, "arith_em_vs_plain_lo": diff.lo, "arith_em_vs_plain_hi": diff.hi,
            "passkey_in": mine["passkey_in"], "passkey_in_plain": theirs["passkey_in"],
            "n_passkey_in": mine["n_passkey_in"], "kl_streamed": mine["kl_streamed"],
            "kl_plain": theirs["kl_streamed"], "n_kl_tokens": mine["n_kl_tokens"],
            "paper_gsm8k": paper.get("gsm8k"), "paper_gsm8k_plain": TABLE9_NO_EVICTION if paper else None,
        })
    return tables.with_intervals(rows, SPEC)


def note(rows: list[dict]) -> str:
    first = rows[0]
    return (f"Each token attends to the first {first['sinks']} tokens (sinks) and its {first['window']} predecessors; "
            f"every other token is freed from the method's stores (kv_quant frees whole key groups of "
            f"{max(r['granule'] for r in rows)} tokens, so it holds a few more). Tokens held and bytes at a context "
            f"of {first['context']} tokens (method_eval.seq_len, the KL windows' length) against the teacher's full "
            f"cache there. Evicting - no eviction: paired over the same arithmetic items (Tango's 95% interval). "
            f"The paper's window evicts mostly GSM8K's 8-shot exemplars (~74% of a ~1k-token context); our arithmetic "
            f"chains (prompt and worked answer ~90 tokens) hold none, so a window short of a chain evicts the "
            f"question itself. Paper: {TABLE9_SOURCE}: 8-bit quantisation + "
            f"eviction .510, LLA 4x + eviction .520, no eviction about .79 (its text; eviction alone not reported). "
            f"{tables.n_summary(rows)}.")
