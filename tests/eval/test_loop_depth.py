"""The teacher's tasks at other test-time depths (teacher_eval.loop_depths): a depth's evaluation is the
evaluation of the same checkpoint built to run that many loops (Ouro) / steps (Huginn), the model's
own depth comes back afterwards, and the teacher-depth table tabulates what teacher-eval wrote."""
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from loopkv.errors import LoopKVError
from loopkv.eval.depth import at_depth, quality_by_depth
from loopkv.eval.quality import evaluate_quality
from loopkv.report import teacher_depth
from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws

CFG = {"seq_len": 32, "heldout_batches": 1, "batch_size": 4, "arithmetic_max_new_tokens": 6}


@pytest.fixture(scope="module")
def huginn_dir(tmp_path_factory, tokenizer):
    """A tiny random Huginn with the test tokenizer (weights at a visible scale: its own init is tiny)."""
    from loopkv.models.configuration_huginn import HuginnConfig
    from loopkv.models.modeling_huginn import HuginnForCausalLM

    config = HuginnConfig(vocab_size=len(tokenizer), n_embd=32, n_heads=2, n_layers=4, n_layers_in_prelude=1,
                          n_layers_in_recurrent_block=2, n_layers_in_coda=1, mean_recurrence=3, intermediate_size=64,
                          block_size=256, rope_base=10000, pad_token_id=tokenizer.pad_token_id,
                          bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = HuginnForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.3)
    out = tmp_path_factory.mktemp("huginn")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _reference(path, tokenizer, corpus_dir, tasks, steps, **depth_field):
    """The checkpoint loaded as a model of that depth (its config.json's field set at load), evaluated."""
    model = AutoModelForCausalLM.from_pretrained(path, **depth_field).eval()
    with fixed_draws(MEASUREMENT_SEED, torch.device("cpu")):
        return evaluate_quality(model, tokenizer, corpus_dir, tasks, CFG, CFG["seq_len"], heldout=False)


def _outputs(samples):
    return {task: [s["output"] for s in rows] for task, rows in samples.items()}


@pytest.mark.parametrize("family", ["ouro", "huginn"])
def test_a_depth_is_the_checkpoint_built_to_run_it(family, teacher_dir, huginn_dir, tokenizer, corpus_dir,
                                                   micro_task_dirs):
    path, field, own, depths = ((teacher_dir, "total_ut_steps", 2, [1, 3]) if family == "ouro"
                                else (huginn_dir, "mean_recurrence", 3, [1, 5]))
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    assert model.config.total_ut_steps == own
    torch.manual_seed(11)
    metrics, samples = quality_by_depth(model, tokenizer, corpus_dir, micro_task_dirs, CFG, depths)
    assert model.config.total_ut_steps == own and set(metrics) == {str(d) for d in depths}
    outputs = {}
    for steps in depths:
        want_metrics, want_samples = _reference(path, tokenizer, corpus_dir, micro_task_dirs, steps, **{field: steps})
        assert metrics[str(steps)] == want_metrics
        assert _outputs(samples[str(steps)]) == _outputs(want_samples)
        outputs[steps] = _outputs(want_samples)
    # the depth matters to what this model generates (so the equalities above say something)
    _, at_own = _reference(path, tokenizer, corpus_dir, micro_task_dirs, own)
    assert outputs[depths[0]] != _outputs(at_own) and outputs[depths[0]] != outputs[depths[1]]


def test_an_ouro_depth_is_the_exit_at_that_loop_of_the_full_model(teacher_dir, tokenizer, corpus_dir, micro_task_dirs):
    """Ouro's exit at loop k of its T (exit_at_step = k - 1, every loop run) generates what k loops do."""
    model = AutoModelForCausalLM.from_pretrained(teacher_dir).eval()
    metrics, samples = quality_by_depth(model, tokenizer, corpus_dir, micro_task_dirs, CFG, [1])
    exiting = AutoModelForCausalLM.from_pretrained(teacher_dir, exit_at_step=0).eval()
    want_metrics, want_samples = evaluate_quality(exiting, tokenizer, corpus_dir, micro_task_dirs, CFG, CFG["seq_len"],
                                                  heldout=False)
    assert metrics["1"] == want_metrics and _outputs(samples["1"]) == _outputs(want_samples)
    with pytest.raises(LoopKVError, match="exit_at_step"):   # an exit setting would pick its own loop
        quality_by_depth(exiting, tokenizer, corpus_dir, micro_task_dirs, CFG, [1])


def test_the_own_depth_comes_back_after_an_error_and_a_bad_depth_is_refused(teacher_dir):
    model = AutoModelForCausalLM.from_pretrained(teacher_dir).eval()
    with pytest.raises(RuntimeError, match="inside"):
        with at_depth(model, 5):
            assert model.config.total_ut_steps == 5
            raise RuntimeError("inside")
    assert model.config.total_ut_steps == 2
    for bad in (0, -1, True, 2.0):
        with pytest.raises(LoopKVError, match="test-time depth"):
            with at_depth(model, bad):
                pass


def _tasks(em: float, n_arith=10, passkey=None):
    return {"arithmetic": {"exact_match": em, "n": n_arith}, "cloze": {"accuracy": 0.25, "n": 8},
            "passkey": {"by_length": passkey or {"100": {"accuracy": 1.0, "n": 3}, "300": {"accuracy": 0.0, "n": 3}}}}


def _huginn_metrics():
    return {"model_type": "huginn_raven", "loop_depth": 4,
            "heldout": {"n_tokens": 640, "ce": 3.5, "ce_at_1": 4.0, "ce_at_2": 3.7, "ce_at_4": 3.5, "ce_at_8": 3.49},
            **_tasks(0.5), "by_loop_depth": {"16": _tasks(0.6), "1": _tasks(0.1)}}


def test_the_table_has_a_row_per_depth_with_the_measured_ce_and_the_own_depth_from_the_top_level():
    rows = teacher_depth.build_rows(_huginn_metrics(), passkey_train_max=200)
    assert [r["loop_depth"] for r in rows] == [1, 4, 16]           # by value ("16" < "4" as strings)
    assert [r["own_depth"] for r in rows] == [False, True, False]
    assert [r["heldout_ce"] for r in rows] == [4.0, 3.5, None]      # 16 steps: not measured
    assert [r["arith_em"] for r in rows] == [0.1, 0.5, 0.6]         # the own depth: the top level's
    assert rows[0]["passkey_in"] == 1.0 and rows[0]["passkey_out"] == 0.0 and rows[0]["n_passkey_in"] == 3
    ouro = {"model_type": "ouro", "loop_depth": 2, "heldout": {"n_tokens": 10, "per_loop_ce": [3.2, 3.1]},
            **_tasks(0.5), "by_loop_depth": {"1": _tasks(0.2), "3": _tasks(0.4)}}
    assert [r["heldout_ce"] for r in teacher_depth.build_rows(ouro, 200)] == [3.2, 3.1, None]


def test_the_table_files_carry_wilson_bounds(tmp_path):
    from scipy.stats import binomtest

    rows = teacher_depth.build_rows(_huginn_metrics(), passkey_train_max=200)
    teacher_depth_files = [tmp_path / f"t.{ext}" for ext in ("pdf", "csv", "tex")]
    from loopkv.report import tables

    tables.write_all(rows, teacher_depth.SPEC, teacher_depth.note(rows, "huginn_raven"), "t", *teacher_depth_files)
    import csv

    got = list(csv.DictReader(open(teacher_depth_files[1])))
    want = binomtest(1, 10).proportion_ci(0.95, method="wilson")
    assert abs(float(got[0]["arith_em_lo"]) - want.low) < 1e-9 and abs(float(got[0]["arith_em_hi"]) - want.high) < 1e-9
    assert got[2]["heldout_ce"] == ""


@pytest.mark.parametrize("mutate, message", [
    (lambda m: m.pop("by_loop_depth"), "no by_loop_depth"),
    (lambda m: m["by_loop_depth"].update({"two": _tasks(0.1)}), "loop depth 'two' is not a whole number"),
    (lambda m: m["by_loop_depth"]["1"].pop("cloze"), "depth 1: field 'cloze' is missing"),
    (lambda m: m["by_loop_depth"]["1"]["arithmetic"].update(n="10"), "field 'arithmetic.n'"),
    (lambda m: m["heldout"].update(ce_at_1="4.0"), "not a number"),
    (lambda m: m["by_loop_depth"]["1"]["passkey"]["by_length"].update({"x1": {"accuracy": 1.0, "n": 1}}),
     "passkey length 'x1'"),
    (lambda m: m.update(loop_depth="4"), "field 'loop_depth'"),
    (lambda m: m.update(loop_depth=0), "loop_depth 0 is not a whole number >= 1"),
    (lambda m: m.pop("model_type"), "field 'model_type' is missing"),
    (lambda m: m["by_loop_depth"].update({"0": _tasks(0.1)}), "loop depth '0' is not"),
    (lambda m: m["by_loop_depth"].update({"01": _tasks(0.2)}), "loop depth '01' is not"),
    (lambda m: m["by_loop_depth"].update({"\u00b2": _tasks(0.2)}), "is not a whole number"),
    (lambda m: m["by_loop_depth"].update({"4": _tasks(0.2)}), "loop depth 4 is given twice"),   # the own depth
    (lambda m: m["by_loop_depth"]["1"]["arithmetic"].update(exact_match=1.5), "exact_match 1.5 of n=10"),
    (lambda m: m["by_loop_depth"]["1"]["arithmetic"].update(exact_match=float("nan")), "exact_match nan"),
    (lambda m: m["by_loop_depth"]["1"]["arithmetic"].update(exact_match=0.15), "depth 1: arithmetic exact_match"),
    (lambda m: m["by_loop_depth"]["1"]["cloze"].update(n=-8), "cloze accuracy 0.25 of n=-8"),
])
def test_a_malformed_result_is_refused_naming_the_file_and_field(mutate, message):
    metrics = json.loads(json.dumps(_huginn_metrics()))
    mutate(metrics)
    with pytest.raises(LoopKVError, match=message) as err:
        teacher_depth.build_rows(metrics, 200, where="teacher-eval result q.json")
    assert "q.json" in str(err.value)
