"""The teacher at each test-time depth (teacher_eval.loop_depths): held-out CE and task scores against
the number of recurrence steps a Huginn runs, or the loop an Ouro exits at. Huginn's signature is the
shape of this table (more steps, better answers, up to a point; LLA's Table 3 runs Huginn at 32); for
Ouro it is the per-exit-loop view: does the teacher use its later loops?"""
from __future__ import annotations

import re

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
    if value is None and isinstance(per_loop, list) and 1 <= steps <= len(per_loop):
        value = per_loop[steps - 1]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise LoopKVError(f"{where}: the held-out CE at {steps} steps is {value!r}, not a number")
    return value


# what a depth's evaluation must hold (a teacher-eval result's top level and each by_loop_depth entry)
TASK_FIELDS = {"arithmetic": {"exact_match": (int, float), "n": int}, "cloze": {"accuracy": (int, float), "n": int},
               "passkey": {"by_length": dict}}
RESULT_FIELDS = {"model_type": str, "loop_depth": int, "heldout": {"n_tokens": int}, "by_loop_depth": dict,
                 **TASK_FIELDS}
_WHOLE = re.compile(r"[1-9][0-9]*")


def _whole(text, what: str, where: str) -> int:
    """A positive whole number written plainly ("16"; not "016", "²" or "-1"), or an int >= 1."""
    if not (isinstance(text, str) and _WHOLE.fullmatch(text)) and not (type(text) is int and text >= 1):
        raise LoopKVError(f"{where}: {what} {text!r} is not a whole number >= 1")
    return int(text)


def _proportion(value, n, what: str, where: str) -> None:
    """An accuracy of n items: a value in [0, 1] (NaN fails the comparison) that is a whole count of them."""
    if not (isinstance(n, int) and n >= 0) or not (0.0 <= value <= 1.0):
        raise LoopKVError(f"{where}: {what} {value!r} of n={n!r} is not an accuracy of n items")
    if n:
        tables.proportion_interval(value, n, f"{where}: {what}")


def _task_fields(m: dict, passkey_train_max: int, where: str) -> dict:
    check_fields(m, TASK_FIELDS, where)
    _proportion(m["arithmetic"]["exact_match"], m["arithmetic"]["n"], "arithmetic exact_match", where)
    _proportion(m["cloze"]["accuracy"], m["cloze"]["n"], "cloze accuracy", where)
    lengths = set()
    for length, cell in m["passkey"]["by_length"].items():
        lengths.add(_whole(length, "passkey length", where))
        check_fields(cell, {"accuracy": (int, float), "n": int}, where)
        _proportion(cell["accuracy"], cell["n"], f"passkey accuracy at length {length}", where)
    if len(lengths) < len(m["passkey"]["by_length"]):
        raise LoopKVError(f"{where}: a passkey length is given twice")
    return tables.task_fields(m, passkey_train_max)


def build_rows(metrics: dict, passkey_train_max: int, where: str = "teacher quality.json") -> list[dict]:
    """One row per depth, ascending: the teacher's own (its evaluation's top level) and each of
    by_loop_depth's. A result without by_loop_depth is refused (nothing to tabulate), as is one whose
    fields are not what teacher-eval writes (`where` names the file)."""
    if isinstance(metrics, dict) and not metrics.get("by_loop_depth"):
        raise LoopKVError(f"{where}: no by_loop_depth (the teacher was evaluated at its own depth only: "
                          "set teacher_eval.loop_depths)")
    check_fields(metrics, RESULT_FIELDS, where)
    own = _whole(metrics["loop_depth"], "loop_depth", where)
    at = {}
    for key, m in metrics["by_loop_depth"].items():
        steps = _whole(key, "loop depth", where)
        if steps in at or steps == own:
            raise LoopKVError(f"{where}: loop depth {steps} is given twice (by_loop_depth holds the depths "
                              f"other than the model's own, {own}, each once)")
        at[steps] = m
    at[own] = metrics
    heldout = metrics["heldout"]
    return [{"loop_depth": steps, "own_depth": steps == own, "heldout_ce": heldout_at(heldout, steps, where),
             "n_heldout_tokens": heldout["n_tokens"],
             **_task_fields(at[steps], passkey_train_max, f"{where}, depth {steps}")}
            for steps in sorted(at)]


def _counts(rows: list[dict], key: str) -> str:
    return "/".join(str(n) for n in sorted({r[key] for r in rows}))


def note(rows: list[dict], family: str) -> str:
    what = ("recurrence steps, each depth's evaluation starting from the same seed (the initial states a "
            "Huginn draws are the same at every depth, batch by batch)"
            if family == "huginn_raven" else "the loop the model exits at (above its T: extrapolation)")
    return (f"Steps: {what}. Held-out CE from the teacher's one held-out measurement "
            f"({_counts(rows, 'n_heldout_tokens')} tokens), '-' at a depth it does not measure. Greedy decoding "
            f"through the full cache; 95% Wilson intervals; n per cell: arithmetic {_counts(rows, 'n_arith')}, "
            f"cloze {_counts(rows, 'n_cloze')}, passkey {_counts(rows, 'n_passkey_in')} (<= train length) / "
            f"{_counts(rows, 'n_passkey_out')} (beyond).")
