"""MELT Tables 3 (gate variants) and 4 (recipe components) from our runs, and MELT vs the teacher's
KV methods at MELT's own cache budget (a table neither paper has). Measured columns first; the
paper's AIME24 pass@1 beside where the paper reports the row (our stand-in task is arithmetic EM).
"""
from __future__ import annotations

from loopkv.report import tables
from loopkv.report.paper_values import MELT_SOURCE, MELT_TABLE3, MELT_TABLE4, MELT_TABLE4_SOURCE, TABLE1, TABLE1_SOURCE

QUALITY = [("kl_streamed", "KL\nstreamed"), ("top1_streamed", "top-1\nstreamed"), ("arith_em", "arith EM"),
           ("cloze_acc", "cloze acc"), ("passkey_in", "passkey\n<= train len"), ("passkey_out", "passkey\n> train len")]
EXTRA = tables.N_FIELDS + ["cache_dtype", "compute_dtype", "bytes_per_token"]

TABLE3 = tables.TableSpec(
    columns=[("recipe", "recipe"), ("gate", "gate"), ("heldout_kl", "held-out KL\n(training fwd)"), *QUALITY,
             ("paper_aime24", "paper\nAIME24")], csv_extra=EXTRA, width=15,
    proportions=tables.QUALITY_PROPORTIONS)
TABLE4 = tables.TableSpec(
    columns=[("recipe", "recipe"), ("chunk", "train\nchunk"), ("interpolation", "KV\ninterp."),
             ("align_stage", "stage 2"), ("heldout_kl", "held-out KL\n(training fwd)"), *QUALITY,
             ("paper_acc", "paper acc.\n(unnamed\nbenchmark)")], csv_extra=EXTRA, width=17,
    proportions=tables.QUALITY_PROPORTIONS)
VERSUS = tables.TableSpec(
    columns=[("method", "method"), ("budget", "budget"), ("bytes_per_token", "B/token"), ("bytes_ratio", "ratio\nbytes"),
             ("trained", "trained"), *QUALITY, ("paper_gsm8k", "paper (LLA T1)\nGSM8K")],
    csv_extra=tables.N_FIELDS + ["cache_dtype", "compute_dtype", "recipe"], width=16,
    proportions=tables.QUALITY_PROPORTIONS)


def recipe_row(name: str, recipe: dict, metrics: dict, curve: dict, passkey_train_max: int) -> dict:
    """recipe: the five recipe keys; curve: the final stage's train_curve.json."""
    return {"recipe": name, "gate": recipe["gate"],
            "chunk": recipe["chunk_size"] if recipe["chunk_size"] is not None else "whole row",
            "interpolation": recipe["interpolation"], "align_stage": recipe["align_stage"],
            "heldout_kl": curve["best"]["kl"], **tables.quality_fields(metrics, passkey_train_max)}


def recipe_rows(which: int, recipes: dict[str, dict], metrics: dict, curves: dict, passkey_train_max: int) -> list[dict]:
    """One row per recipe, in the given order (train/melt_recipes.table_members), then a "not run" row
    for every paper value no recipe here measures. Table 3's paper values are keyed by gate (the full
    recipe is the element-wise gate), Table 4's by recipe."""
    paper, column, key_of = ((MELT_TABLE3, "paper_aime24", lambda name, r: r["gate"]) if which == 3
                             else (MELT_TABLE4, "paper_acc", lambda name, r: name))
    rows = [{**recipe_row(name, r, metrics[name], curves[name], passkey_train_max),
             column: paper.get(key_of(name, r))} for name, r in recipes.items()]
    run = {key_of(name, r) for name, r in recipes.items()}

    def missing(key, value):   # Table 3: a gate no recipe here uses; Table 4: a recipe not configured
        where = {"recipe": tables.NOT_RUN, "gate": key} if which == 3 else {"recipe": key, "chunk": tables.NOT_RUN}
        return {**where, column: value}

    return rows + tables.not_run_rows(paper, run, missing)


def versus_rows(teacher: dict, melt: dict, others: list[dict], passkey_train_max: int) -> list[dict]:
    from loopkv.cache.registry import codec_methods   # trained: a distilled codec

    rows = []
    for m, trained in [(teacher, False), (melt, True), *((o, o["method"] in codec_methods()) for o in others)]:
        paper = TABLE1.get((m["method"], round(m["setting"]["ratio"], 2)), {}) if m["method"] != "melt" else {}
        rows.append({"method": m["method"], "budget": m["budget"], "trained": trained,
                     **tables.quality_fields(m, passkey_train_max), "paper_gsm8k": paper.get("gsm8k"),
                     "recipe": "full" if m["method"] == "melt" else None})
    return rows


def recipe_note(rows: list[dict]) -> str:
    first = next(r for r in rows if "bytes_per_token" in r)
    return (f"Every recipe served sequentially: every token, prompt or generated, reads its predecessors' "
            f"final rows (B/token "
            f"{first['bytes_per_token']} in {first['cache_dtype']}, {first['bytes_ratio']:.2f}x below the teacher); "
            f"held-out KL = final-loop KL to the teacher on validation windows, the model run as trained "
            f"(chunk-wise, alpha = 1), best checkpoint of the final stage. Stand-in for AIME24: arithmetic chains "
            f"(exact match). {tables.n_summary(rows)}. Paper: {MELT_SOURCE}; {MELT_TABLE4_SOURCE}: its one number "
            f"(removing chunk-wise training) is an accuracy on a benchmark it does not name, and its full recipe is "
            f"Table 3's element-wise gate. '{tables.NOT_RUN}': a paper row no recipe here runs.")


def versus_note(rows: list[dict]) -> str:
    first = rows[0]
    return (f"All methods on the same teacher, tasks and streamed decoder; B/token in {first['cache_dtype']} "
            f"(kv_quant includes its fp16 scales and zeros). MELT's budget is fixed by its architecture "
            f"(2 * H * d_head per layer per token); the other methods are put at the same ratio. "
            f"{tables.n_summary(rows)}. Paper column: {TABLE1_SOURCE} at 4x (Ouro-1.4B, GSM8K); "
            f"neither paper measures MELT at this budget.")
