"""The teacher at each test-time depth (teacher_eval.loop_depths): held-out CE and task scores against
the number of recurrence steps a Huginn runs, or the loop an Ouro exits at. Huginn's signature is the
shape of this table (more steps, better answers, up to a point; LLA's Table 3 runs Huginn at 32); for
Ouro it is the per-exit-loop view: does the teacher use its later loops?"""
from __future__ import annotations

from loopkv.errors import LoopKVError
from loopkv.report import tables
from loopkv.utils.checked_io import check_fields

SPEC = tables.TableSpec(
    columns=[("loop_depth", "steps\n(loops)"), ("own_depth", "the model's\nown depth"),
             ("heldout_ce", "held-out CE\n(nats/token)"), ("arith_em", "arith\nEM"), ("cloze_acc", "cloze\nacc"),
             ("passkey_in", "passkey\n<= train len"), ("passkey_out", "passkey\n> train len")],
    csv_extra=["n_heldout_tokens", "n_arith", "n_cloze", "n_passkey_in", "n_passkey_out"], width=11.0,
    proportions=tables.QUALITY_PROPORTIONS)


def heldout_at(heldout: dict, steps: int, where: str = "held-out result") -> float | None:
    """The held-out CE at `steps` from the teacher's one held-out measurement: Huginn's CE at that step
    count (eval/heldout.py's eval_steps), Ouro's CE at that exit loop (1..T); None where not measured."""
    per_loop = heldout.get("per_loop_ce")
    value = heldout.get(f"ce_at_{steps}")
    if value is None and isinstance(per_loop, list) and steps <= len(per_loop):
        value = per_loop[steps - 1]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise LoopKVError(f"{where}: the held-out CE at {steps} steps is {value!r}, not a number")
    return value


# what a depth's evaluation must hold (a teacher-eval result's top level and each by_loop_depth entry)
TASK_FIELDS = {"arithmetic": {"exact_match": (int, float), "n": int}, "cloze": {"accuracy": (int, float), "n": int},
               "passkey": {"by_length": dict}}
RESULT_FIELDS = {"loop_depth": int, "heldout": {"n_tokens": int}, "by_loop_depth": dict, **TASK_FIELDS}


def _whole(text: str, what: str, where: str) -> int:
    if not str(text).isdigit():
        raise LoopKVError(f"{where}: {what} {text!r} is not a whole number")
    return int(text)


def _task_fields(m: dict, passkey_train_max: int, where: str) -> dict:
    check_fields(m, TASK_FIELDS, where)
    for length, cell in m["passkey"]["by_length"].items():
        _whole(length, "passkey length", where)
        check_fields(cell, {"accuracy": (int, float), "n": int}, where)
    return tables.task_fields(m, passkey_train_max)


def build_rows(metrics: dict, passkey_train_max: int, where: str = "teacher quality.json") -> list[dict]:
    """One row per depth, ascending: the teacher's own (its evaluation's top level) and each of
    by_loop_depth's. A result without by_loop_depth is refused (nothing to tabulate), as is one whose
    fields are not what teacher-eval writes (`where` names the file)."""
    if isinstance(metrics, dict) and not metrics.get("by_loop_depth"):
        raise LoopKVError(f"{where}: no by_loop_depth (the teacher was evaluated at its own depth only: "
                          "set teacher_eval.loop_depths)")
    check_fields(metrics, RESULT_FIELDS, where)
    own = metrics["loop_depth"]
    at = {_whole(steps, "loop depth", where): m for steps, m in metrics["by_loop_depth"].items()} | {own: metrics}
    heldout = metrics["heldout"]
    return [{"loop_depth": steps, "own_depth": steps == own, "heldout_ce": heldout_at(heldout, steps, where),
             "n_heldout_tokens": heldout["n_tokens"],
             **_task_fields(at[steps], passkey_train_max, f"{where}, depth {steps}")}
            for steps in sorted(at)]


def note(rows: list[dict], family: str) -> str:
    what = ("recurrence steps from one seeded initial state per token (the same draws at every depth)"
            if family == "huginn_raven" else "the loop the model exits at (above its T: extrapolation)")
    return (f"Steps: {what}. Held-out CE from the teacher's one held-out measurement, '-' at a depth it "
            f"does not measure ({rows[0]['n_heldout_tokens']} tokens). Greedy decoding through the full cache; "
            f"95% Wilson intervals; n per cell: arithmetic {rows[0]['n_arith']}, cloze {rows[0]['n_cloze']}, "
            f"passkey {rows[0]['n_passkey_in']} (<= train length) / {rows[0]['n_passkey_out']} (beyond).")
