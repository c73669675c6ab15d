"""The cross-report check: Table 1's cell and the lm-eval suite's result for one (method, budget)
and synthetic task agree when they scored the same items, and a planted disagreement fails the
check naming both files; results that are not the same measurement are reported, never compared."""
import json

import pytest

from loopkv.cli import main
from loopkv.errors import LoopKVError
from loopkv.report.agreement import check

TASK_FILE = {"path": "results/data/tasks/passkey", "sha256": "a" * 64}
TEACHER = {"path": "results/teacher/model", "sha256": "b" * 64}


def method_eval(tmp_path, accuracy=0.75, n=4, task_file=TASK_FILE, device="cpu"):
    """A quality.json as method-eval writes it (the fields the check reads)."""
    path = tmp_path / "methods/full/1x/quality.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "metrics": {"method": "full", "budget": "1x", "passkey": {"accuracy": accuracy, "n": n, "by_length": {}},
                    "cloze": {"accuracy": 0.5, "accuracy_norm": 0.25, "n": 4}},
        "provenance": {"inputs": {"task:passkey": task_file, "teacher": TEACHER}, "device": device,
                       "config": {"method_eval": {"arithmetic_max_new_tokens": 64}}}}))
    return path


def lm_eval(tmp_path, accuracy=0.75, n=4, teacher=TEACHER):
    """A merged lm-eval result as lm-eval-merge writes it: two shards' provenance."""
    path = tmp_path / "lm_eval/full/1x/passkey.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    shard = {"inputs": {"data": TASK_FILE, "teacher": teacher}, "device": "cpu",
             "config": {"lm_eval": {"tasks": {"passkey": {}}}}}
    path.write_text(json.dumps({
        "method": "full", "budget": "1x", "task": "loopkv_passkey", "n": n, "metrics": {"accuracy": accuracy},
        "provenance": {"merged_from": {"shard0of2.json": shard, "shard1of2.json": shard}}}))
    return path


def test_the_same_items_scored_alike_agree(tmp_path):
    report = check([(method_eval(tmp_path), lm_eval(tmp_path))])
    assert report["agree"] == 1 and report["disagree"] == 0
    assert report["rows"][0]["quantity"] == "accuracy" and report["rows"][0]["n"] == 4


def test_a_planted_disagreement_fails_naming_both_files(tmp_path, capsys):
    quality, lm = method_eval(tmp_path, accuracy=1.0), lm_eval(tmp_path, accuracy=0.0)
    out = tmp_path / "agreement.json"
    assert main(["check-agreement", "--pairs", str(quality), str(lm), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(quality) in err and str(lm) in err and "1.0000" in err and "0.0000" in err
    assert not out.exists()
    assert main(["check-agreement", "--pairs", str(method_eval(tmp_path)), str(lm_eval(tmp_path)),
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["agree"] == 1


def test_one_item_may_differ_where_batching_can_tip_a_near_tie(tmp_path):
    report = check([(method_eval(tmp_path, accuracy=1.0), lm_eval(tmp_path, accuracy=0.75))])
    assert report["agree"] == 1 and report["rows"][0]["items_differ"] == 1
    assert check([(method_eval(tmp_path, accuracy=1.0), lm_eval(tmp_path, accuracy=0.5))])["disagree"] == 1


def test_the_lm_eval_arithmetic_budget_default_is_the_templates():
    from loopkv.eval.lm_tasks import _load_template
    from loopkv.report.agreement import LM_ARITHMETIC_DEFAULT_BUDGET

    template = _load_template("arithmetic.yaml", resolve=False)
    assert template["generation_kwargs"]["max_gen_toks"] == LM_ARITHMETIC_DEFAULT_BUDGET


@pytest.mark.parametrize("plant, why", [
    (lambda t: (method_eval(t, device="cuda:0"), lm_eval(t)), "different devices (cuda vs ['cpu'])"),
    (lambda t: (method_eval(t, task_file={"path": "x", "sha256": "c" * 64}), lm_eval(t)), "different task files"),
    (lambda t: (method_eval(t), lm_eval(t, teacher={"path": "x", "sha256": "d" * 64})), "different model files"),
    (lambda t: (method_eval(t, n=8, accuracy=1.0), lm_eval(t)), "different item counts (8 vs 4)"),
])
def test_other_measurements_are_not_compared(tmp_path, plant, why):
    report = check([plant(tmp_path)])
    assert report["disagree"] == 0 and report["rows"][0]["status"] == "not_comparable"
    assert report["rows"][0]["why"] == why


def test_a_malformed_result_is_an_error_naming_it(tmp_path):
    quality, lm = method_eval(tmp_path), lm_eval(tmp_path)
    lm.write_text(json.dumps({"method": "full", "budget": "1x", "n": 4, "metrics": {"accuracy": 1.0}}))
    with pytest.raises(LoopKVError, match="passkey.json: no provenance"):
        check([(quality, lm)])
    lm.write_text('{"truncated": ')
    with pytest.raises(LoopKVError, match=r"result .*passkey.json"):
        check([(quality, lm)])
    with pytest.raises(LoopKVError, match="not a task Table 1 also measures"):
        check([(quality, tmp_path / "lm_eval/full/1x/gsm8k.json")])
