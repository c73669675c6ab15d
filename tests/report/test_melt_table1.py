"""MELT Table 1 from merged lm-eval results: a row per benchmark of the paper's table (never dropped:
"not run"), the teacher and MELT with 95% intervals and n (Wilson for a proportion, a bootstrap of
pass@1 over documents for a sampled run), the decoding, fractions throughout, and results that are
not of this table refused."""
import csv
import json

import numpy as np
import pytest
from scipy import stats

from loopkv.cli import main
from loopkv.errors import LoopKVError
from loopkv.report import melt_table1, tables
from loopkv.report.paper_values import MELT_TABLE1, MELT_TABLE1_DECODING, MELT_TABLE1_MODELS, MELT_TABLE1_SOURCE

SAMPLED = {"strategy": "sampling", "temperature": 1.0, "top_p": 0.7, "samples": 4, "seed": 3}
# 6 documents, 4 samples each
CORRECT = {"full": [[1, 1, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]],
           "melt": [[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]}


def _prov(tid, settings):
    """A merged result's provenance: its shards' config slices (views.lm_eval_task)."""
    return {"merged_from": {"shard0of1.json": {"config": {"lm_eval": {"tasks": {tid: settings}}}}}}


def _greedy(task, method, correct, headline="exact_match", decoding=None, variant=None, settings=None):
    budget = "1x" if method == "full" else "2x"
    tid = f"{task}-{variant}" if variant else task
    samples = [{"doc_id": i, headline: float(c)} for i, c in enumerate(correct)]
    r = {"task": f"loopkv_{task}", "task_id": tid, "variant": variant, "method": method, "budget": budget,
         "setting": {"ratio": 1.0 if method == "full" else 2.0}, "headline": headline,
         "metrics": {headline: sum(correct) / len(correct)}, "samples": samples, "n": len(samples), "shots": 0,
         "decoding": decoding or {"strategy": "greedy"}, "samples_per_doc": 1}
    if settings is not None:
        r["provenance"] = _prov(tid, settings)
    return r


def _sampled(task, method, correct, decoding=SAMPLED, variant="sampled", headline="exact_match"):
    k = decoding["samples"]
    samples = [{"doc_id": i, headline: sum(c) / k, "per_sample": {headline: [float(x) for x in c]},
                "outputs": ["..."] * k} for i, c in enumerate(correct)]
    r = _greedy(task, method, [0] * len(correct), headline=headline, decoding=decoding, variant=variant,
                settings={"max_gen_toks": 96})
    r.update(samples=samples, metrics={headline: sum(s[headline] for s in samples) / len(samples)}, samples_per_doc=k)
    return r


def results():
    return [
        _greedy("math500", "full", [1, 1, 0, 1, 0, 1, 1, 0, 1, 1], settings={}),   # 7 of 10, the template's budget
        _greedy("math500", "melt", [1, 0, 0, 1, 0, 0, 1, 0, 1, 0], settings={}),
        _sampled("math500", "full", CORRECT["full"]), _sampled("math500", "melt", CORRECT["melt"]),
        _greedy("gpqa", "full", [1, 0, 0, 1, 0], headline="acc", decoding={"strategy": "loglikelihood"}),
        _greedy("humaneval", "full", [1, 0, 0, 0], headline="pass@1", settings={"max_gen_toks": 64}),
        _greedy("humaneval", "melt", [0, 0, 0, 0], headline="pass@1", settings={"max_gen_toks": 64}),
        # a sampled run at another temperature: the greedy run stays the row's
        _sampled("humaneval", "full", [[1, 0], [0, 0], [0, 0], [0, 0]], variant="hot", headline="pass@1",
                 decoding={**SAMPLED, "temperature": 0.6, "samples": 2}),
        _sampled("humaneval", "melt", [[0, 0], [0, 0], [0, 1], [0, 0]], variant="hot", headline="pass@1",
                 decoding={**SAMPLED, "temperature": 0.6, "samples": 2}),
    ]


def _rows():
    rs = results()
    return melt_table1.build_rows(rs), rs


def test_a_row_per_benchmark_of_melt_table1_in_its_order_none_dropped():
    rows, _ = _rows()
    assert [r["benchmark"] for r in rows] == ["AIME24", "AIME25", "AIME26", "AMC23", "MATH-500", "OlympiadBench",
                                              "GPQA", "MMLU-Redux", "HumanEval", "HLE"]
    assert len(rows) == len(MELT_TABLE1)
    by = {r["benchmark"]: r for r in rows}
    for name in ("AIME24", "AIME25", "AIME26", "AMC23", "OlympiadBench", "MMLU-Redux", "HLE"):
        assert by[name]["task"] == tables.NOT_RUN and by[name].get("teacher") is None and by[name].get("melt") is None
    assert by["HLE"]["paper_melt"] == pytest.approx(MELT_TABLE1["hle"]["melt"] / 100) and by["HLE"]["paper_ouro"] is None
    # a benchmark run for the teacher only: MELT's cell is empty, the row stays
    assert by["GPQA"]["task"] == "gpqa" and by["GPQA"]["n_teacher"] == 5 and by["GPQA"].get("melt") is None
    assert by["GPQA"]["decoding"] == "log-likelihood" and by["GPQA"]["max_new_tokens"] is None
    assert by["GPQA"]["scoring"] == "letter log-lik. *" and by["GPQA"]["scoring_differs"] == "MELT generates its answer"
    assert by["MATH-500"]["scoring"] == "math-verify" and by["MATH-500"]["scoring_differs"] is None


def test_the_run_matching_melts_decoding_is_preferred_and_the_others_named():
    rows, _ = _rows()
    by = {r["benchmark"]: r for r in rows}
    math = by["MATH-500"]
    assert (math["task"], math["decoding"], math["also_run"]) == ("math500-sampled", "T=1.0 p=0.7 n=4", "math500")
    assert math["melt_protocol"] and math["max_new_tokens"] == 96 and math["samples_per_doc"] == 4
    code = by["HumanEval"]   # sampled, but not at MELT's temperature: the benchmark's greedy run
    assert (code["task"], code["decoding"], code["also_run"]) == ("humaneval", "greedy", "humaneval-hot")
    assert not code["melt_protocol"] and code["max_new_tokens"] == 64
    note = melt_table1.note(rows, melt_table1.teacher_name({"source": "pretrained", "path": "ckpt/Ouro-1.4B"}))
    assert "Teacher: the checkpoint ckpt/Ouro-1.4B; the paper's Ouro column is Ouro-1.4B-Thinking" in note
    assert "MATH-500: math500-sampled shown, math500 also run" in note
    assert "HumanEval: humaneval shown, humaneval-hot also run" in note
    assert "Not at MELT's decoding here: HumanEval (greedy)" in note
    assert "log-likelihood of the answer letter" in note and "model" in note and "32k" in note
    assert MELT_TABLE1_SOURCE in note


def test_without_the_sampled_run_the_greedy_one_is_shown_with_the_templates_budget():
    rows = melt_table1.build_rows(results()[:2])
    math = next(r for r in rows if r["benchmark"] == "MATH-500")
    assert (math["task"], math["decoding"], math["also_run"]) == ("math500", "greedy", None)
    assert math["max_new_tokens"] == 512    # null max_gen_toks: math.yaml's own


def test_a_proportion_has_the_wilson_interval():
    rows, _ = _rows()
    math = melt_table1.build_rows(results()[:2])[4]
    ci = stats.binomtest(7, 10).proportion_ci(confidence_level=0.95, method="wilson")
    assert (math["teacher"], math["n_teacher"], math["interval_teacher"]) == (0.7, 10, "wilson")
    assert (math["teacher_lo"], math["teacher_hi"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    ci = stats.binomtest(4, 10).proportion_ci(confidence_level=0.95, method="wilson")
    assert (math["melt_lo"], math["melt_hi"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    gpqa = rows[6]
    ci = stats.binomtest(2, 5).proportion_ci(confidence_level=0.95, method="wilson")
    assert (gpqa["teacher_lo"], gpqa["teacher_hi"]) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_a_sampled_run_is_pass_at_1_with_a_bootstrap_over_documents():
    rows, _ = _rows()
    math = rows[4]
    for model, method in (("teacher", "full"), ("melt", "melt")):
        per_doc = np.array([sum(c) / 4 for c in CORRECT[method]])
        assert math[model] == pytest.approx(per_doc.mean()) and math[f"n_{model}"] == 6
        assert math[f"interval_{model}"] == "bootstrap"
        ref = stats.bootstrap((per_doc,), np.mean, confidence_level=0.95, n_resamples=10000, method="percentile",
                              random_state=np.random.default_rng(1)).confidence_interval
        assert math[f"{model}_lo"] == pytest.approx(ref.low, abs=0.04)
        assert math[f"{model}_hi"] == pytest.approx(ref.high, abs=0.04)
        assert math[f"{model}_lo"] <= math[model] <= math[f"{model}_hi"]


def test_one_unit_fractions_the_papers_percentages_divided_by_100():
    rows, _ = _rows()
    for row in rows:
        bench = next(k for k in MELT_TABLE1 if melt_table1._label(k) == row["benchmark"])
        for model in MELT_TABLE1_MODELS:
            expected = MELT_TABLE1[bench].get(model)
            assert row[f"paper_{model}"] == (None if expected is None else pytest.approx(expected / 100))
        values = [row.get(k) for k in ("teacher", "melt", "paper_melt", "paper_ouro")]
        assert all(0.0 <= v <= 1.0 for v in values if v is not None)
    assert "fraction" in melt_table1.TITLE and "Unit: every value is a fraction" in melt_table1.note(rows, "t")
    percent = results()[:2]
    percent[0]["metrics"]["exact_match"] = 70.0           # a percentage where a fraction belongs
    with pytest.raises(LoopKVError, match=r"70.0 is not a fraction in \[0, 1\]"):
        melt_table1.build_rows(percent)


def test_the_papers_decoding_values_are_its_sources_words():
    assert f"temperature {MELT_TABLE1_DECODING['temperature']:.1f}" in MELT_TABLE1_SOURCE
    assert f"top-p {MELT_TABLE1_DECODING['top_p']:g}" in MELT_TABLE1_SOURCE
    assert f"up to {MELT_TABLE1_DECODING['max_tokens']} tokens" in MELT_TABLE1_SOURCE


@pytest.mark.parametrize("edit, message", [
    (lambda rs: rs.append(_greedy("gsm8k", "full", [1, 0])), "'gsm8k' is not a benchmark of MELT Table 1"),
    (lambda rs: rs.append({**_greedy("math500", "full", [1]), "method": "lla", "budget": "4x"}),
     "MELT Table 1 sets the teacher \\(full/1x\\) beside MELT \\(melt/<its budget>\\), not lla/4x"),
    (lambda rs: rs.append({**_greedy("humaneval", "melt", [1], headline="pass@1"), "task_id": "humaneval-x",
                           "budget": "4x"}), "MELT at more than one budget"),
    (lambda rs: rs.append(results()[0]), "a second result of full/1x on math500"),
    (lambda rs: rs.append({**_greedy("amc23", "full", [1]), "task_id": "aime24"}), "is not a run of its task"),
    (lambda rs: rs[1].update(decoding={"strategy": "sampling", "temperature": 1.0, "top_p": 0.7, "samples": 1, "seed": 0}),
     "disagree on the decoding"),
])
def test_results_not_of_this_table_are_refused(edit, message):
    rs = results()[:2]
    edit(rs)
    with pytest.raises(LoopKVError, match=message):
        melt_table1.build_rows(rs)


def test_the_files_and_the_command(tmp_path):
    _, rs = _rows()
    paths = []
    for i, r in enumerate(rs):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(r))
    out = [x for f in ("pdf", "csv", "tex") for x in (f"--{f}", str(tmp_path / f"t.{f}"))]
    cfg = ["--cfg", json.dumps({"model": {"source": "pretrained", "path": "ckpt/Ouro-1.4B"}})]
    main(["--debug", "melt-table1", *cfg, "--results", *map(str, paths), *out])
    lines = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert len(lines) == len(MELT_TABLE1)
    math = next(line for line in lines if line["benchmark"] == "MATH-500")
    assert math["task"] == "math500-sampled" and math["n_teacher"] == "6" and math["melt_model"] == "melt/2x"
    assert float(math["teacher_lo"]) < float(math["teacher"]) < float(math["teacher_hi"])
    assert {"paper_qwen3_1.7b", "paper_gemma4_e2b", "interval_melt"} <= set(lines[0])
    assert next(line for line in lines if line["benchmark"] == "AIME25")["task"] == tables.NOT_RUN
    tex = (tmp_path / "t.tex").read_text()
    assert "Teacher: the checkpoint ckpt/Ouro-1.4B" in tex
    assert "ours: MELT melt/2x" in tex and "Unit: every value is a fraction" in tex and (tmp_path / "t.pdf").stat().st_size
    # a file of another model is refused, naming the file
    bad = tmp_path / "lla.json"
    bad.write_text(json.dumps({**rs[0], "method": "lla", "budget": "4x"}))
    with pytest.raises(LoopKVError, match=f"{bad} \\(lla/4x, task math500\\)"):
        main(["--debug", "melt-table1", *cfg, "--results", str(paths[0]), str(bad), *out])
