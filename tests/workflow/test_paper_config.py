"""config/ouro-1.4b.yaml's own DAG on the CPU, to every report: the paper config overlaid with sizes
and counts only (paper_cpu.yaml), on a random-weight checkpoint in the published Ouro layout written
at its model.path (loopkv random-checkpoint: auto_map, bos = eos = pad = 0, a GPT2Tokenizer-named
tokenizer.json that splits digits, ChatML turns). The GPU twin at Ouro-1.4B's real size is
benchmarks/gpu_smoke.sh."""
import json
import subprocess
import sys

import pytest

from workflow_helpers import MICRO, copy_workflow, snakemake

pytestmark = pytest.mark.slow

PAPER = ("--configfile", "config/ouro-1.4b.yaml", "paper_cpu.yaml")
REPORTS = ["table1", "melt_table3", "melt_table4", "melt_vs_lla", "fig_memory_vs_length", "table7", "fig8_passkey",
           "table12", "table4", "fig7_exposure", "table5", "table13", "table10", "table14", "fig2_spectra", "claims"]


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("paper"))
    (workdir / "paper_cpu.yaml").write_text(MICRO.with_name("paper_cpu.yaml").read_text())
    subprocess.run([sys.executable, "-m", "loopkv", "random-checkpoint", "--config", "config/ouro-1.4b.yaml",
                    "--config", "paper_cpu.yaml", "--out", "checkpoints/Ouro-1.4B", "--text-chars", "400000"],
                   cwd=workdir, check=True, capture_output=True, text=True)
    snakemake(workdir, *PAPER)
    return workdir


def test_every_report_of_the_paper_config_is_built(paper_run):
    for name in REPORTS:
        assert (paper_run / f"reports/ouro-1.4b/{name}.pdf").read_bytes().startswith(b"%PDF"), name


def test_the_results_verify_clean(paper_run):
    # the checkpoint (model.path, outside the results) is a declared input of the configs the run used
    proc = subprocess.run([sys.executable, "-m", "loopkv", "verify", "results/ouro-1.4b", "--configfile", *PAPER[1:]],
                          cwd=paper_run, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_the_checkpoint_is_used_as_it_ships(paper_run):
    from tokenizers import Tokenizer

    from loopkv.data.tokenizer import load_tokenizer

    shipped = Tokenizer.from_file(str(paper_run / "checkpoints/Ouro-1.4B/tokenizer.json"))
    copied = load_tokenizer(paper_run / "results/ouro-1.4b/data/tokenizer")
    for text in (" 61", "x 1024 + 7 = 1031", "#### 48", "The pass key is 71432."):
        assert copied.encode(text, add_special_tokens=False) == shipped.encode(text).ids, text
    # the task prompts start with no BOS (Ouro's tokenizer adds none), and the teacher generated from them
    quality = json.loads((paper_run / "results/ouro-1.4b/teacher/quality.json").read_text())
    assert quality["provenance"]["device"] == "cpu"
    assert quality["metrics"]["arithmetic"]["n"] == 3


def test_table1s_real_benchmark_columns_come_from_lm_eval_for_every_method(paper_run):
    import csv

    rows = [r for r in csv.DictReader(open(paper_run / "reports/ouro-1.4b/table1.csv")) if r["budget"] != "not run"]
    # the paper config's eleven cells, the baselines included, each with its own lm-eval results
    assert {r["method"] for r in rows} == {"full", "final_loop", "lla", "mla_head", "cla", "kv_quant"} and len(rows) == 11
    results = paper_run / "results/ouro-1.4b/lm_eval"
    for r in rows:
        merged = {t: json.loads((results / r["method"] / r["budget"] / f"{t}.json").read_text())
                  for t in ("gsm8k", "arc_easy", "mmlu")}
        assert float(r["gsm8k"]) == merged["gsm8k"]["metrics"]["exact_match"] and r["n_gsm8k"] == "2"
        assert float(r["mmlu"]) == merged["mmlu"]["metrics"]["acc"] and r["shots_gsm8k"] == "0"   # (the twin's)
        assert float(r["mc_avg"]) == merged["arc_easy"]["metrics"]["acc"] and r["mc_tasks"] == "arc_easy"
        assert (r["gsm8k_vs_teacher"] == "") == (r["method"] == "full")


def test_the_sampled_variant_runs_beside_the_greedy_one(paper_run):
    results = paper_run / "results/ouro-1.4b/lm_eval/lla/4x"
    greedy = json.loads((results / "math500.json").read_text())
    sampled = json.loads((results / "math500-sampled.json").read_text())
    assert sampled["decoding"]["strategy"] != greedy.get("decoding", {}).get("strategy")
    assert sampled["doc_ids"] == greedy["doc_ids"] and sampled["samples_per_doc"] == 2


def test_table4_reads_math500_through_lm_eval_off_and_on_policy(paper_run):
    import csv

    rows = [r for r in csv.DictReader(open(paper_run / "reports/ouro-1.4b/table4.csv")) if r["budget"] != "not run"]
    assert [r["budget"] for r in rows] == ["3.2x", "4x"]
    results = paper_run / "results/ouro-1.4b"
    teacher = json.loads((results / "lm_eval/full/1x/math500.json").read_text())
    for r in rows:
        off = json.loads((results / f"lm_eval/lla/{r['budget']}/math500.json").read_text())
        on = json.loads((results / f"lm_eval_on_policy/lla/{r['budget']}/math500.json").read_text())
        # each side served its own codec: the off-policy distillation's, the on-policy one's
        assert (off["codec_training"], on["codec_training"], teacher["codec_training"]) == ("off_policy", "on_policy", None)
        assert on["provenance"]["merged_from"]  # merged shards of the on-policy codec's own jobs
        assert r["source"] == "math500" and int(r["n_items"]) == len(teacher["samples"]) == 2
        assert float(r["em_off"]) == off["metrics"]["exact_match"] and float(r["em_on"]) == on["metrics"]["exact_match"]
        assert float(r["no_answer_on"]) == on["metrics"]["no_answer"]
        curve = json.loads((results / f"on_policy/lla/{r['budget']}/curve.json").read_text())
        assert curve["prompt_lengths"]["prompts"] == 4500   # math_train: every prompt read (too long ones counted)
    figure = json.loads((paper_run / "reports/ouro-1.4b/fig7_exposure.json").read_text())
    assert figure["source"] == "math500" and sum(b["n"] for b in figure["curves"][0]["on"]) == 2
