"""Claim verdicts on constructed report files: reproduced / contradicted / inconclusive / not run,
the registry's size and its references to real table columns."""
import csv
import json

import pytest

from loopkv.claims import verdict
from loopkv.claims.claim import Claim, evaluate
from loopkv.claims.evidence import Computed, Reports, cell
from loopkv.claims.registry import CLAIMS


def _table(tmp_path, name, rows):
    path = tmp_path / f"{name}.csv"
    fields = sorted({k for r in rows for k in r})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _claim(**kw):
    base = dict(id="t", paper="LLA", source="Table 1", statement="s", paper_value="p",
                quantity=cell("table1", "arith_em", "n_arith", method="lla", budget="4x"), op=">=", bound=0.5)
    return Claim(**{**base, **kw})


@pytest.mark.parametrize("em, n, expected", [
    (0.9, 100, verdict.REPRODUCED),      # Wilson [.826, .945]: all above .5
    (0.2, 100, verdict.CONTRADICTED),    # [.133, .289]: all below
    (0.5, 4, verdict.INCONCLUSIVE),      # [.150, .850] spans .5
    (0.75, 4, verdict.INCONCLUSIVE),     # 3 of 4: [.301, .954]
])
def test_a_threshold_claim_on_one_accuracy(tmp_path, em, n, expected):
    reports = Reports({"table1": _table(tmp_path, "table1", [{"method": "lla", "budget": "4x", "arith_em": em,
                                                                "n_arith": n}])})
    result = evaluate(_claim(), reports, "tiny")
    assert result.verdict == expected and result.n == n and "table1.csv" in result.source


def test_a_difference_claim_uses_newcombes_interval(tmp_path):
    rows = [{"method": "full", "budget": "1x", "arith_em": 0.8, "n_arith": 200},
            {"method": "lla", "budget": "4x", "arith_em": 0.79, "n_arith": 200},
            {"method": "mla_head", "budget": "4x", "arith_em": 0.4, "n_arith": 200}]
    reports = Reports({"table1": _table(tmp_path, "table1", rows)})
    teacher = cell("table1", "arith_em", "n_arith", method="full", budget="1x")
    holds = _claim(op=">=", bound=-0.02, minus=teacher)
    # .79 - .80 = -.01, interval about [-.09, .07]: spans -.02
    assert evaluate(holds, reports, "tiny").verdict == verdict.INCONCLUSIVE
    beaten = _claim(quantity=cell("table1", "arith_em", "n_arith", method="mla_head", budget="4x"), op=">=",
                    bound=-0.02, minus=teacher)
    assert evaluate(beaten, reports, "tiny").verdict == verdict.CONTRADICTED   # -.40, about [-.48, -.31]
    beats = _claim(minus=cell("table1", "arith_em", "n_arith", method="mla_head", budget="4x"), bound=0)
    result = evaluate(beats, reports, "tiny")
    assert result.verdict == verdict.REPRODUCED and "newcombe" in result.evidence


def test_point_values_are_decided_by_their_value(tmp_path):
    rows = [{"method": "lla", "budget": "4x", "kl_two_pass": 0.05}, {"method": "mla_head", "budget": "4x", "kl_two_pass": 0.1}]
    reports = Reports({"table1": _table(tmp_path, "table1", rows)})
    lower = _claim(quantity=cell("table1", "kl_two_pass", method="lla", budget="4x"), op="<=", bound=0,
                   minus=cell("table1", "kl_two_pass", method="mla_head", budget="4x"))
    result = evaluate(lower, reports, "tiny")
    assert result.verdict == verdict.REPRODUCED and result.n is None
    assert evaluate(_claim(quantity=lower.minus, op="<=", bound=0, minus=lower.quantity), reports,
                    "tiny").verdict == verdict.CONTRADICTED


def test_not_run_when_the_table_row_or_value_is_absent_or_at_another_scale(tmp_path):
    rows = [{"method": "lla", "budget": "not run", "arith_em": "", "n_arith": ""},   # a paper-only row
            {"method": "cla", "budget": "4x", "arith_em": "", "n_arith": ""}]
    reports = Reports({"table1": _table(tmp_path, "table1", rows)})
    assert evaluate(_claim(), reports, "tiny").verdict == verdict.NOT_RUN
    cla = _claim(quantity=cell("table1", "arith_em", "n_arith", method="cla", budget="4x"))
    assert "has no arith_em" in evaluate(cla, reports, "tiny").evidence
    assert evaluate(_claim(), Reports({}), "tiny").evidence == "table1 is not built by this configuration"
    assert evaluate(_claim(scale="paper"), reports, "tiny").verdict == verdict.NOT_AT_SCALE
    assert evaluate(_claim(scale="paper"), reports, "paper").verdict == verdict.NOT_RUN


def test_computed_quantities_read_json_reports(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"summary": {"melt": {"ratio": 4.0}}}))
    reports = Reports({"mem": tmp_path / "m.json"})
    q = Computed(("mem",), lambda d: d["summary"]["melt"]["ratio"], "ratio")
    assert evaluate(_claim(quantity=q, op=">=", bound=4.0), reports, "tiny").verdict == verdict.REPRODUCED
    missing = Computed(("mem",), lambda d: d["summary"]["lla"]["ratio"], "lla ratio")
    assert evaluate(_claim(quantity=missing), reports, "tiny").verdict == verdict.NOT_RUN


def test_a_passkey_claim_on_a_method_the_grid_does_not_serve_is_not_run(tmp_path):
    from loopkv.claims.registry import CLAIMS

    (tmp_path / "f.json").write_text(json.dumps({"methods": [
        {"method": "full", "budget": "1x", "lengths": [64, 128], "pooled_accuracy": [1.0, 1.0], "reliable_length": 128},
        {"method": "lla", "budget": "4x", "lengths": [64, 128], "pooled_accuracy": [1.0, 0.5], "reliable_length": 64}]}))
    reports = Reports({"fig8_passkey": tmp_path / "f.json"})
    by_id = {c.id: evaluate(c, reports, "tiny") for c in CLAIMS if c.id.startswith("lla-t12")}
    assert by_id["lla-t12-teacher-reliable"].verdict == verdict.REPRODUCED
    assert by_id["lla-t12-4x-reliable"].verdict == verdict.CONTRADICTED   # reliable to 64 of 128 tokens
    assert by_id["lla-t12-21x-fails"].verdict == verdict.NOT_RUN           # no 21.33x in this grid


def test_the_registry_states_every_claim_once_and_names_real_columns():
    from loopkv.report import (ablations, decoupled_table, eviction_table, exposure, melt_tables, rank_sweep,
                               serving_tables, table1, table7)

    assert len(CLAIMS) >= 30 and len({c.id for c in CLAIMS}) == len(CLAIMS)
    assert {c.paper for c in CLAIMS} >= {"LLA", "MELT"}
    every_column = table1.table_spec([{k: 0.5 for k, _ in table1.BENCHMARK_COLUMNS}])   # benchmarks configured
    fields = {"table1": every_column.csv_fields, "table7": table7.SPEC.csv_fields, "table4": exposure.SPEC.csv_fields,
              "melt_table3": melt_tables.TABLE3.csv_fields, "melt_table4": melt_tables.TABLE4.csv_fields,
              "melt_vs_lla": melt_tables.VERSUS.csv_fields, "table5": serving_tables.TABLE5.csv_fields,
              "table13": serving_tables.TABLE13.csv_fields,
              "table3_huginn": table1.table_spec([], "Huginn-3.5B").csv_fields,
              "table8": rank_sweep.spec([]).csv_fields, "table10": ablations.SPEC.csv_fields,
              "table9": eviction_table.SPEC.csv_fields, "table14": decoupled_table.SPEC.csv_fields}
    for c in CLAIMS:
        for q in (c.quantity, c.minus):
            if q is None or not hasattr(q, "column"):
                continue
            assert q.column in fields[q.table], (c.id, q.table, q.column)
            assert q.n is None or q.n in fields[q.table], (c.id, q.n)
            assert all(k in fields[q.table] for k, _ in q.row), (c.id, q.row)


def test_table_8s_knee_and_its_1_33x_claim_read_the_sweep(tmp_path):
    """The knee: 2.67x below 2x (independent samples: Newcombe's interval, wider than a paired one);
    1.33x holds: its paired difference to the teacher within MARGIN."""
    import csv

    from loopkv.report import rank_sweep

    rows = [{"method": "full", "budget": "1x", "arith_em": 0.8, "n_arith": 200},
            {"method": "lla", "budget": "1.33x", "arith_em": 0.8, "n_arith": 200, "arith_em_vs_teacher": 0.0,
             "arith_em_vs_teacher_lo": -0.01, "arith_em_vs_teacher_hi": 0.012},
            {"method": "lla", "budget": "2x", "arith_em": 0.78, "n_arith": 200},
            {"method": "lla", "budget": "2.67x", "arith_em": 0.5, "n_arith": 200}]
    with open(tmp_path / "t8.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, rank_sweep.spec([]).csv_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    reports = Reports({"table8": tmp_path / "t8.csv"})
    by_id = {c.id: evaluate(c, reports, "tiny") for c in CLAIMS if c.id.startswith("lla-t8")}
    assert by_id["lla-t8-knee-past-2x"].verdict == verdict.REPRODUCED          # .50 vs .78 on 200 items each
    assert by_id["lla-t8-holds-1.33x"].verdict == verdict.REPRODUCED
    rows[3]["arith_em"] = 0.8
    with open(tmp_path / "t8.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, rank_sweep.spec([]).csv_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    assert evaluate(next(c for c in CLAIMS if c.id == "lla-t8-knee-past-2x"), Reports({"table8": tmp_path / "t8.csv"}),
                    "tiny").verdict == verdict.INCONCLUSIVE                    # .80 vs .78: no knee shown


def test_table_10s_claims_read_each_design_choice_by_the_papers_row(tmp_path):
    """Each claim compares one ablation's best KL with the recipe's, its row found by what it changes
    (paper_row), whatever the variant is called; a missing ablation is 'not run'."""
    import csv

    from loopkv.report import ablations

    rows = [{"variant": "recipe", "paper_row": "full", "kl_best": 0.01},
            {"variant": "rnd", "paper_row": "random_init", "kl_best": 0.08},
            {"variant": "sym", "paper_row": "symmetric", "kl_best": 0.009}]
    with open(tmp_path / "t10.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ablations.SPEC.csv_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    reports = Reports({"table10": tmp_path / "t10.csv"})
    by_id = {c.id: evaluate(c, reports, "tiny").verdict for c in CLAIMS if c.id.startswith("lla-t10")}
    assert by_id["lla-t10-svd-beats-random"] == verdict.REPRODUCED
    assert by_id["lla-t10-asymmetric-beats-symmetric"] == verdict.CONTRADICTED     # .009 < .010
    assert by_id["lla-t10-svd-beats-loop1"].startswith("not run")


def test_table_9s_claims_read_the_evicting_cells(tmp_path):
    """LLA 4x evicting against 8-bit evicting (two accuracies: Newcombe's interval); a cell not run is
    'not run'."""
    import csv

    from loopkv.report import eviction_table

    rows = [{"method": "kv_quant", "budget": "2x", "arith_em": 0.5, "n_arith": 200},
            {"method": "lla", "budget": "4x", "arith_em": 0.52, "n_arith": 200, "arith_em_vs_plain": -0.27,
             "arith_em_vs_plain_lo": -0.33, "arith_em_vs_plain_hi": -0.21}]
    with open(tmp_path / "t9.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, eviction_table.SPEC.csv_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    by_id = {c.id: evaluate(c, Reports({"table9": tmp_path / "t9.csv"}), "tiny").verdict
             for c in CLAIMS if c.id.startswith("lla-t9")}
    # .52 vs .50 on 200 items each: the difference's interval reaches below -2 points
    assert by_id == {"lla-t9-composes-like-quantisation": verdict.INCONCLUSIVE}
    for row in rows:
        row["n_arith"] = 4000
    with open(tmp_path / "t9.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, eviction_table.SPEC.csv_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    claim = next(c for c in CLAIMS if c.id == "lla-t9-composes-like-quantisation")
    assert evaluate(claim, Reports({"table9": tmp_path / "t9.csv"}), "tiny").verdict == verdict.REPRODUCED
    with open(tmp_path / "t9.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, eviction_table.SPEC.csv_fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows[1:])
    assert evaluate(claim, Reports({"table9": tmp_path / "t9.csv"}), "tiny").verdict.startswith("not run")


def test_a_bad_claim_is_refused():
    with pytest.raises(ValueError, match="op must be"):
        _claim(op=">")
    with pytest.raises(ValueError, match="scale must be"):
        _claim(scale="huge")


def test_a_paired_interval_the_table_computed_is_used_as_it_is(tmp_path):
    rows = [{"method": "lla", "budget": "4x", "arith_em_vs_teacher": -0.05, "arith_em_vs_teacher_lo": -0.08,
             "arith_em_vs_teacher_hi": -0.025, "n_arith": 200},
            {"method": "cla", "budget": "4x", "arith_em_vs_teacher": -0.05, "arith_em_vs_teacher_lo": "",
             "arith_em_vs_teacher_hi": "", "n_arith": 200}]
    reports = Reports({"table1": _table(tmp_path, "table1", rows)})
    paired = cell("table1", "arith_em_vs_teacher", "n_arith", bounded=True, method="lla", budget="4x")
    result = evaluate(_claim(quantity=paired, op=">=", bound=-0.02), reports, "tiny")
    assert result.verdict == verdict.CONTRADICTED and "paired" in result.evidence and result.n == 200
    assert evaluate(_claim(quantity=paired, op=">=", bound=-0.1), reports, "tiny").verdict == verdict.REPRODUCED
    assert evaluate(_claim(quantity=paired, op=">=", bound=-0.05), reports, "tiny").verdict == verdict.INCONCLUSIVE
    missing = cell("table1", "arith_em_vs_teacher", "n_arith", bounded=True, method="cla", budget="4x")
    assert "no interval" in evaluate(_claim(quantity=missing), reports, "tiny").evidence


def test_a_claim_about_another_paper_model_is_not_tested(tmp_path):
    reports = Reports({"table1": _table(tmp_path, "table1", [{"method": "lla", "budget": "4x", "arith_em": 0.9,
                                                                "n_arith": 100}])})
    about_2_6b = _claim(model="Ouro-2.6B")
    result = evaluate(about_2_6b, reports, "paper")   # a 1.4B run
    assert result.verdict == verdict.NOT_AT_SCALE and "about Ouro-2.6B" in result.evidence
    assert evaluate(about_2_6b, reports, "paper", "Ouro-2.6B").verdict == verdict.REPRODUCED
    assert evaluate(_claim(), reports, "paper", "Ouro-2.6B").verdict == verdict.NOT_AT_SCALE


def test_real_benchmark_claims_read_table1s_paired_columns(tmp_path):
    from loopkv.claims.registry import CLAIMS as REGISTRY

    rows = [{"method": "full", "budget": "1x", "gsm8k": 0.75, "n_gsm8k": 40},
            {"method": "lla", "budget": "4x", "gsm8k": 0.75, "n_gsm8k": 40, "gsm8k_vs_teacher": 0.0,
             "gsm8k_vs_teacher_lo": -0.01, "gsm8k_vs_teacher_hi": 0.01}]
    reports = Reports({"table1": _table(tmp_path, "table1", rows)})
    claim = next(c for c in REGISTRY if c.id == "lla-t1-gsm8k-4x")
    result = evaluate(claim, reports, "paper")
    # the paired interval [-.01, .01] is above -.02; two independent Wilson intervals of 30 / 40 could not say so
    assert result.verdict == verdict.REPRODUCED and result.n == 40 and "paired" in result.evidence
    assert evaluate(claim, reports, "tiny").verdict == verdict.NOT_AT_SCALE


def test_newcombe_is_refused_for_intervals_that_are_not_wilsons(tmp_path):
    from loopkv.errors import LoopKVError

    rows = [{"method": "lla", "budget": "4x", "mc_avg": 0.45, "mc_avg_lo": 0.4, "mc_avg_hi": 0.5, "n_mc": 110},
            {"method": "mla_head", "budget": "4x", "mc_avg": 0.40, "mc_avg_lo": 0.35, "mc_avg_hi": 0.45, "n_mc": 110}]
    reports = Reports({"table1": _table(tmp_path, "table1", rows)})
    mean_of_tasks = _claim(quantity=cell("table1", "mc_avg", "n_mc", bounded=True, method="lla", budget="4x"),
                           minus=cell("table1", "mc_avg", "n_mc", bounded=True, method="mla_head", budget="4x"),
                           bound=0)
    with pytest.raises(LoopKVError, match="Newcombe's interval needs two accuracies"):
        evaluate(mean_of_tasks, reports, "tiny")


def test_huginn_claims_are_judged_on_a_huginn_run_only(tmp_path):
    """Table 3's claims read the Huginn run's table and structure; an Ouro run says they are about another
    paper model, and a Huginn run judges no Ouro claim."""
    import csv
    import json

    from loopkv.claims.claim import evaluate
    from loopkv.claims.evidence import Reports
    from loopkv.report import table1

    spec = table1.table_spec([], "Huginn-3.5B")
    rows = [{"method": "lla", "budget": "32x", "kl_svd_only": 0.004}, {"method": "lla", "budget": "64x", "kl_svd_only": 0.3},
            {"method": "lla", "budget": "128x", "kl_svd_only": 0.5, "kl_two_pass": 0.2}]
    with open(tmp_path / "t3.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=spec.csv_fields)
        writer.writeheader()
        writer.writerows(rows)
    errors = {"16x": {"k": {"loop": 0.01, "head": 0.3, "head_over_loop": 30.0}}}
    (tmp_path / "s.json").write_text(json.dumps({"measured": {"svd_error_by_axis": errors}}))
    reports = Reports({"table3_huginn": tmp_path / "t3.csv", "cross_loop_structure": tmp_path / "s.json"})
    huginn = {c.id: c for c in CLAIMS if c.model == "Huginn-3.5B"}
    assert set(huginn) == {"lla-t3-svd-near-lossless-32x", "lla-t3-distilled-128x-beats-svd-64x", "lla-s5-head-axis-worse"}
    verdicts = {i: evaluate(c, reports, "tiny", "Huginn-3.5B").verdict for i, c in huginn.items()}
    assert set(verdicts.values()) == {"reproduced"}, verdicts
    assert all(evaluate(c, reports, "tiny", "Ouro-1.4B").verdict.startswith("not run") for c in huginn.values())
    ouro = [c for c in CLAIMS if c.model != "Huginn-3.5B"]
    assert all(evaluate(c, reports, "tiny", "Huginn-3.5B").verdict.startswith("not run") for c in ouro)


def test_table4_claims_read_the_paired_on_minus_off_columns(tmp_path):
    """On- and off-policy codecs answer the same items: the claim takes the table's paired interval (here
    entirely above 0: reproduced), not Newcombe's on the two accuracies (which would span 0)."""
    rows = [{"method": "lla", "budget": "4x", "em_on": 0.55, "em_off": 0.5, "n_items": 200, "em_on_minus_off": 0.05,
             "em_on_minus_off_lo": 0.02, "em_on_minus_off_hi": 0.08, "no_answer_on_minus_off": -0.05,
             "no_answer_on_minus_off_lo": -0.08, "no_answer_on_minus_off_hi": -0.02}]
    reports = Reports({"table4": _table(tmp_path, "table4", rows)})
    by_id = {c.id: evaluate(c, reports, "tiny") for c in CLAIMS if c.id.startswith("lla-t4")}
    assert by_id["lla-t4-on-policy-helps-4x"].verdict == verdict.REPRODUCED
    assert "paired" in by_id["lla-t4-on-policy-helps-4x"].evidence
    assert by_id["lla-t4-on-policy-answers-4x"].verdict == verdict.REPRODUCED
    assert by_id["lla-t4-on-policy-hurts-21x"].verdict == verdict.NOT_RUN
