"""The lm-eval model "loopkv": through lm-eval, a local task gives the numbers our own evaluators give
(per document), sharded runs merge into the unsharded result, and the CLI pass-through works."""
import json

import pytest
import torch

from loopkv.cache import make_cache
from loopkv.cli import main
from loopkv.errors import LoopKVError
from loopkv.eval.lm_model import LoopKVLM
from loopkv.eval.lm_runner import merge_shards, run_task, select_docs, shard_docs
from loopkv.eval.lm_tasks import task_config
from loopkv.eval.quality import arithmetic_exact_match, cloze_accuracy, passkey_accuracy
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.utils.atomic import read_jsonl

METHODS = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"2x": 2.0}}


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory, tokenizer):
    config = OuroConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, total_ut_steps=2,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        max_position_embeddings=256, initializer_range=0.3, pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("teacher")
    OuroForCausalLM(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module", params=[("full", "1x"), ("final_loop", "2x")])
def lm(request, teacher_dir):
    method, budget = request.param
    return LoopKVLM(teacher=str(teacher_dir), method=method, budget=budget, methods_cfg=METHODS,
                    dtype="float32", batch_size=4)


def _direct_factory(lm):
    return lambda: make_cache(lm.served.setting["method"], lm.served.model.config, **lm.served.setting["kwargs"])


def test_multiple_choice_through_lm_eval_equals_the_direct_evaluator(lm, micro_task_dirs):
    rows = read_jsonl(micro_task_dirs["cloze"] / "test.jsonl")
    result = run_task(lm, task_config("loopkv_cloze", micro_task_dirs["cloze"]), list(range(len(rows))))
    direct = cloze_accuracy(lm.served.model, lm.tokenizer, rows, 4, _direct_factory(lm))
    assert result["metrics"]["acc"] == direct["accuracy"]
    assert result["metrics"]["acc_norm"] == direct["accuracy_norm"]
    assert result["n"] == direct["n"] == len(rows)


def test_generation_through_lm_eval_equals_the_direct_evaluator(lm, micro_task_dirs):
    for task, evaluate in (("arithmetic", lambda m, t, r, f: arithmetic_exact_match(m, t, r, 4, 24, f)),
                           ("passkey", lambda m, t, r, f: passkey_accuracy(m, t, r, 4, f))):
        rows = read_jsonl(micro_task_dirs[task] / "test.jsonl")
        cfg = task_config(f"loopkv_{task}", micro_task_dirs[task], max_gen_toks=24, tokenizer=lm.tokenizer)
        result = run_task(lm, cfg, list(range(len(rows))))
        metrics, samples = evaluate(lm.served.model, lm.tokenizer, rows, _direct_factory(lm))
        assert [s["output"] for s in result["samples"]] == [s["output"] for s in samples]   # same text, doc by doc
        headline = "exact_match" if task == "arithmetic" else "accuracy"
        assert result["metrics"][headline] == metrics[headline]


def test_loglikelihoods_are_the_streamed_scores_and_greedy_flags_are_argmax(lm):
    from lm_eval.api.instance import Instance

    reqs = [Instance("loglikelihood", {}, ("to be or", " not to be"), 0),
            Instance("loglikelihood", {}, ("the king", " is dead"), 1)]
    scores = lm.loglikelihood(reqs)
    ctx = [[lm.tokenizer.bos_token_id] + lm.tokenizer.encode(r.args[0], add_special_tokens=False) for r in reqs]
    conts = [lm.tokenizer.encode(r.args[1], add_special_tokens=False) for r in reqs]
    model = lm.served.model
    for (logp, greedy), c, k in zip(scores, ctx, conts):
        logits = model(torch.tensor([c + k]), use_cache=False).logits[0].float().log_softmax(-1)
        positions = torch.arange(len(c), len(c) + len(k))
        expected = float(logits[positions - 1, torch.tensor(k)].sum())
        if lm.served.setting["method"] == "full":      # exact cache: equals one teacher-forced forward
            assert logp == pytest.approx(expected, abs=1e-4)
            assert greedy == bool((logits[positions - 1].argmax(-1) == torch.tensor(k)).all())
        else:                                           # a lossy cache scores differently
            assert abs(logp - expected) > 1e-4
    rolling = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, ("to be or not to be",), 0)])
    assert rolling[0] < 0


def test_shards_merge_into_the_unsharded_result(teacher_dir, micro_task_dirs):
    lm = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4)
    cfg = task_config("loopkv_cloze", micro_task_dirs["cloze"])
    selection = select_docs(8, 6, seed=3)
    whole = run_task(lm, cfg, selection)
    shards = []
    for i in range(3):
        part = run_task(lm, cfg, shard_docs(selection, i, 3))
        shards.append({**part, "shard": i, "shards": 3, "selection": selection})
    merged = merge_shards(shards)
    assert merged["metrics"] == whole["metrics"] and merged["doc_ids"] == selection
    assert merged["samples"] == whole["samples"]
    with pytest.raises(LoopKVError, match="expected shards 0..1"):
        merge_shards(shards[:2])
    with pytest.raises(LoopKVError, match="missing or duplicated"):
        merge_shards([{**shards[0], "shard": 0, "shards": 2}, {**shards[0], "shard": 1, "shards": 2}])


def test_document_selection_is_seeded_and_shards_partition_it():
    assert select_docs(10, None, 1) == list(range(10)) == select_docs(10, 50, 1)
    picked = select_docs(100, 10, 1)
    assert picked == select_docs(100, 10, 1) != select_docs(100, 10, 2) and picked == sorted(picked)
    assert sorted(sum((shard_docs(picked, i, 3) for i in range(3)), [])) == picked
    with pytest.raises(LoopKVError):
        shard_docs(picked, 3, 3)


def test_the_model_refuses_bad_arguments(teacher_dir):
    with pytest.raises(LoopKVError, match="unknown argument"):
        LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, temperature=1)
    with pytest.raises(LoopKVError, match="needs teacher"):
        LoopKVLM()
    with pytest.raises(LoopKVError, match="needs a codec"):
        LoopKVLM(teacher=str(teacher_dir), method="lla", budget="2x", methods_cfg=METHODS)


def test_lm_eval_command_line_with_the_loopkv_model(teacher_dir, micro_task_dirs, tmp_path, capsys):
    out = tmp_path / "out"
    main(["lm-eval", "--task-data", f"loopkv_cloze={micro_task_dirs['cloze']}", "--",
          "--model", "loopkv", "--model_args", f"teacher={teacher_dir}", "--tasks", "loopkv_cloze",
          "--batch_size", "4", "--output_path", str(out)])
    written = list(out.rglob("results_*.json"))
    assert len(written) == 1
    acc = json.loads(written[0].read_text())["results"]["loopkv_cloze"]["acc,none"]
    lm = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4)
    rows = read_jsonl(micro_task_dirs["cloze"] / "test.jsonl")
    assert acc == cloze_accuracy(lm.served.model, lm.tokenizer, rows, 4, lm.served.cache_factory)["accuracy"]


def test_stop_strings_end_generation_early_without_changing_the_text(teacher_dir, micro_task_dirs):
    from lm_eval.api.instance import Instance

    lm = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4)
    prompts = [r["prompt"] for r in read_jsonl(micro_task_dirs["arithmetic"] / "test.jsonl")[:4]]
    full = lm.generate_until([Instance("generate_until", {}, (p, {"until": [], "max_gen_toks": 24}), i)
                              for i, p in enumerate(prompts)])
    # a stop string taken from the full generations themselves, so some rows do stop early
    stop = next(t[len(t) // 2:len(t) // 2 + 2] for t in full if len(t) > 4)
    cut = lm.generate_until([Instance("generate_until", {}, (p, {"until": [stop], "max_gen_toks": 24}), i)
                             for i, p in enumerate(prompts)])
    assert cut == [t[:t.find(stop)] if stop in t else t for t in full]
    assert any(stop in t for t in full)


@pytest.mark.parametrize("order", ["teacher_first", "teacher_last"])
def test_methods_reading_the_teachers_files_answer_as_their_direct_evaluation_in_any_job_order(
        teacher_dir, micro_task_dirs, tmp_path, order):
    """The teacher, final_loop, cla and kv_quant all serve from the teacher's files. Through one
    request-cache directory, in either job order, each one's passkey answers (Figure 8 / Table 12's
    path) equal that method's direct evaluation on the same items (Table 1's path); with the cache
    keyed by the files alone the first to run answered for all."""
    methods = {**METHODS, "budgets": {"2x": 2.0}, "kv_quant_group": 4}
    cfg = {"seed": 1, "lm_eval": {"batch_size": 4, "tasks": {"passkey": {}}}, "methods": methods,
           "model": {"dtype": "float32"}}
    cache = tmp_path / "cache"
    pairs = [("full", "1x"), ("final_loop", "2x"), ("cla", "2x"), ("kv_quant", "2x")]
    if order == "teacher_last":
        pairs = pairs[::-1]
    rows = read_jsonl(micro_task_dirs["passkey"] / "test.jsonl")
    direct_outputs = {}
    for method, budget in pairs:
        out = tmp_path / f"{method}.json"
        main(["lm-eval-shard", "--cfg", json.dumps(cfg), "--task", "loopkv_passkey",
              "--data", str(micro_task_dirs["passkey"]), "--method", method, "--budget", budget,
              "--teacher", str(teacher_dir), "--shard", "0", "--shards", "1", "--out", str(out),
              "--cache-dir", str(cache)])
        through_lm_eval = json.loads(out.read_text())["samples"]
        direct = LoopKVLM(teacher=str(teacher_dir), method=method, budget=budget, methods_cfg=methods,
                          dtype="float32", batch_size=4)
        _, samples = passkey_accuracy(direct.served.model, direct.tokenizer, rows, 4, _direct_factory(direct))
        direct_outputs[method] = [s["output"] for s in samples]
        assert [s["output"] for s in through_lm_eval] == direct_outputs[method], method
    assert len(list(cache.iterdir())) == len(pairs)   # one request cache per way of reading the weights
    assert len({tuple(o) for o in direct_outputs.values()}) > 1   # the methods answer differently: the test can fail
