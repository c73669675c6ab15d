"""The lm-eval model "loopkv": through lm-eval, a local task gives the numbers our own evaluators give
(per document), sharded runs merge into the unsharded result, and the CLI pass-through works."""
import json

import pytest
import torch

from loopkv.cache import make_cache
from loopkv.cli import main
from loopkv.errors import LoopKVError
from loopkv.eval.lm_model import LoopKVLM
from loopkv.eval.lm_runner import group_selection, merge_shards, run_task, select_docs, shard_docs
from loopkv.eval.lm_tasks import task_config
from loopkv.eval.quality import arithmetic_exact_match, cloze_accuracy, passkey_accuracy
from loopkv.utils.atomic import read_jsonl

METHODS = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"2x": 2.0}}



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


def test_an_evaluation_runs_no_machine_report(lm, micro_task_dirs, monkeypatch):
    # lm-eval's environment report (torch's collect_env, subprocesses) cost every shard job 1-2 s and
    # no result reads it; the call is lm-eval's own, restored after the evaluation
    import lm_eval.evaluator
    import torch.utils.collect_env

    reports = []
    monkeypatch.setattr(torch.utils.collect_env, "get_pretty_env_info", lambda: reports.append(1) or "")
    before = lm_eval.evaluator.add_env_info
    result = run_task(lm, task_config("loopkv_cloze", micro_task_dirs["cloze"]), [0, 1])
    assert reports == [] and result["n"] == 2 and lm_eval.evaluator.add_env_info is before


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


def test_a_per_group_selection_takes_a_seeded_sample_of_each_group():
    """max_docs_per_group (LLA's BBH: 25 a subtask): min(N, size) documents of each group, in document
    order, the same every call, another seed another sample; the shards split it."""
    sizes = {"a": 3, "b": 30, "c": 7}
    groups = [g for i in range(30) for g in sizes if i < sizes[g]]     # interleaved, as a shuffled set would be
    members = {g: [i for i, h in enumerate(groups) if h == g] for g in sizes}
    picked = select_docs(len(groups), None, 1, max_docs_per_group=5, groups=groups)
    assert picked == sorted(picked) and len(set(picked)) == len(picked) == 3 + 5 + 5
    assert {g: sum(groups[i] == g for i in picked) for g in sizes} == {"a": 3, "b": 5, "c": 5}
    assert set(members["a"]) <= set(picked)                             # a smaller group: all of it
    assert picked == select_docs(len(groups), None, 1, max_docs_per_group=5, groups=groups)
    other = select_docs(len(groups), None, 2, max_docs_per_group=5, groups=groups)
    assert other != picked and {g: sum(groups[i] == g for i in other) for g in sizes} == {"a": 3, "b": 5, "c": 5}
    # a group's sample depends on the seed and that group alone: adding a group changes no other's
    more = select_docs(len(groups) + 4, None, 1, max_docs_per_group=5, groups=[*groups, *"dddd"])
    assert more == sorted([*picked, *range(len(groups), len(groups) + 4)])
    assert select_docs(len(groups), None, 1, max_docs_per_group=30, groups=groups) == list(range(len(groups)))
    assert group_selection(picked, groups) == {"a": [3, 3], "b": [5, 30], "c": [5, 7]}
    for shards in (1, 2, 4):
        parts = [shard_docs(picked, i, shards) for i in range(shards)]
        assert sorted(sum(parts, [])) == picked and all(parts)
    with pytest.raises(LoopKVError, match="cannot both be set"):
        select_docs(len(groups), 10, 1, max_docs_per_group=5, groups=groups)
    with pytest.raises(LoopKVError, match="needs the group of each"):
        select_docs(len(groups), None, 1, max_docs_per_group=5, groups=groups[:-1])


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


# ---------------------------------------------------------------- sampled decoding (issue 22)

SAMPLING = {"temperature": 1.0, "top_p": 0.9, "samples": 3, "seed": 5}


def _sampled_cfg(micro_task_dirs, **sampling):
    return task_config("loopkv_arithmetic", micro_task_dirs["arithmetic"], max_gen_toks=24,
                       sampling={**SAMPLING, **sampling})


def test_a_sampled_task_scores_every_sample_and_averages_them_per_document(teacher_dir, micro_task_dirs):
    from loopkv.eval.lm_tasks.metrics import arithmetic

    lm = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4)
    rows = read_jsonl(micro_task_dirs["arithmetic"] / "test.jsonl")
    result = run_task(lm, _sampled_cfg(micro_task_dirs), list(range(len(rows))))
    assert result["decoding"] == {"strategy": "sampling", "temperature": 1.0, "top_p": 0.9, "samples": 3, "seed": 5}
    assert result["samples_per_doc"] == 3 and result["n"] == len(rows)
    for row in result["samples"]:
        doc = rows[row["doc_id"]]
        assert len(row["outputs"]) == 3
        # each sample scored on its own (not lm-eval's default take_first), the document's value their mean
        assert row["per_sample"]["exact_match"] == [arithmetic(doc, [o])["exact_match"] for o in row["outputs"]]
        assert row["exact_match"] == sum(row["per_sample"]["exact_match"]) / 3
    assert result["metrics"]["exact_match"] == sum(r["exact_match"] for r in result["samples"]) / len(rows)
    # the draws differ between samples (the test can fail) and are not the greedy outputs
    assert any(len(set(r["outputs"])) > 1 for r in result["samples"])
    greedy = run_task(lm, task_config("loopkv_arithmetic", micro_task_dirs["arithmetic"], max_gen_toks=24),
                      list(range(len(rows))))
    assert greedy["decoding"] == {"strategy": "greedy"} and "outputs" not in greedy["samples"][0]
    assert [r["outputs"] for r in result["samples"]] != [[r["output"]] * 3 for r in greedy["samples"]]


def test_a_documents_samples_do_not_depend_on_shard_or_batch_size(teacher_dir, micro_task_dirs):
    cfg = _sampled_cfg(micro_task_dirs)
    selection = select_docs(8, 5, seed=3)
    whole = run_task(LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4),
                     cfg, selection)
    alone = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=1)
    shards = [{**run_task(alone, cfg, shard_docs(selection, i, 2)), "shard": i, "shards": 2, "selection": selection}
              for i in range(2)]
    merged = merge_shards(shards)
    assert merged["samples"] == whole["samples"] and merged["metrics"] == whole["metrics"]
    assert merged["decoding"] == whole["decoding"] and merged["samples_per_doc"] == 3
    # another seed draws other samples; shards of different decodings never merge
    other = run_task(alone, _sampled_cfg(micro_task_dirs, seed=6), shard_docs(selection, 1, 2))
    assert [r["outputs"] for r in other["samples"]] != [r["outputs"] for r in shards[1]["samples"]]
    with pytest.raises(LoopKVError, match="disagree on the decoding"):
        merge_shards([shards[0], {**other, "shard": 1, "shards": 2, "selection": selection}])


def test_a_tiny_nucleus_through_lm_eval_is_the_greedy_run(teacher_dir, micro_task_dirs):
    lm = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4)
    docs = list(range(4))
    sampled = run_task(lm, _sampled_cfg(micro_task_dirs, top_p=1e-6, samples=2), docs)
    greedy = run_task(lm, task_config("loopkv_arithmetic", micro_task_dirs["arithmetic"], max_gen_toks=24), docs)
    assert [r["outputs"] for r in sampled["samples"]] == [[r["output"]] * 2 for r in greedy["samples"]]
    assert sampled["metrics"] == greedy["metrics"]


def test_pass_at_1_is_the_mean_over_documents_of_each_documents_share_of_correct_samples():
    """lm-eval's logged samples of a 4-sample task (one per document and sample filter), by hand:
    documents with 2, 0 and 3 correct samples of 4 give (0.5 + 0 + 0.75) / 3 = 5/12."""
    from loopkv.eval.lm_runner import _sampled_rows
    from loopkv.stats.intervals import pass_at_k

    correct = {0: [1, 0, 0, 1], 1: [0, 0, 0, 0], 2: [1, 1, 1, 0]}
    logged = [{"doc_id": d, "doc": {"id": f"q{d}"}, "filter": f"sample{k}", "filtered_resps": [f"d{d}s{k}"],
               "exact_match": float(v)} for k in (3, 1, 0, 2) for d, flags in correct.items() for v in [flags[k]]]
    rows, metrics = _sampled_rows({"samples": {"t": logged}}, "t", ["exact_match"], 4)
    assert [r["exact_match"] for r in rows] == [0.5, 0.0, 0.75]
    assert [r["per_sample"]["exact_match"] for r in rows] == [[1.0, 0.0, 0.0, 1.0], [0.0] * 4, [1.0, 1.0, 1.0, 0.0]]
    assert rows[2]["outputs"] == ["d2s0", "d2s1", "d2s2", "d2s3"] and rows[1]["id"] == "q1"
    assert metrics["exact_match"] == pytest.approx(5 / 12) == pass_at_k([4, 4, 4], [2, 0, 3], 1)
    with pytest.raises(LoopKVError, match="expected"):
        _sampled_rows({"samples": {"t": logged[1:]}}, "t", ["exact_match"], 4)


def test_the_model_refuses_generation_settings_it_does_not_implement(teacher_dir):
    from lm_eval.api.instance import Instance

    lm = LoopKVLM(teacher=str(teacher_dir), methods_cfg=METHODS, dtype="float32", batch_size=4)
    for kwargs, says in (({"do_sample": True, "temperature": 1.0, "top_k": 50}, "not supported"),
                         ({"do_sample": False, "temperature": 0.7}, "need do_sample"),
                         ({"top_p": 0.7}, "need do_sample"),
                         ({"do_sample": True, "temperature": 0.0}, "temperature > 0")):
        with pytest.raises(LoopKVError, match=says):
            lm.generate_until([Instance("generate_until", {}, ("to be", {"until": [], "max_gen_toks": 4, **kwargs}), 0)])
    # lm-eval's repeats: the same request k times is k samples, each its own draw, the same on a rerun
    request = Instance("generate_until", {"id": 1}, ("to be", {"until": [], "max_gen_toks": 8, "do_sample": True,
                                                              "temperature": 1.0, "top_p": 1.0, "seed": 3}), 0)
    first = lm.generate_until([request] * 4)
    assert len(set(first)) > 1 and lm.generate_until([request] * 4) == first
    assert lm.generate_until([request] * 2) == first[:2]


def test_a_sampled_entry_runs_through_the_job_commands_beside_the_greedy_one(teacher_dir, micro_task_dirs, tmp_path):
    """lm-eval-shard / lm-eval-merge of the entry {name: arithmetic, variant: s, sampling: ...} (its id
    arithmetic-s) beside the greedy entry; Table 7 shows it as a column of its own."""
    from loopkv.report import table7
    from loopkv.stats.intervals import pass_at_k_interval

    sampling = {"temperature": 1.0, "top_p": 0.7, "samples": 2}      # the seed derived from the global one
    cfg = {"seed": 1, "lm_eval": {"batch_size": 4, "tasks": {"arithmetic": {"max_gen_toks": 24},
                                                             "arithmetic-s": {"max_gen_toks": 24, "sampling": sampling}}},
           "methods": METHODS, "model": {"dtype": "float32"}}
    merged = {}
    for tid, shards in (("arithmetic", 1), ("arithmetic-s", 2)):
        outs = []
        for i in range(shards):
            outs.append(tmp_path / f"{tid}-{i}.json")
            main(["lm-eval-shard", "--cfg", json.dumps(cfg), "--task", f"loopkv_{tid}", "--data",
                  str(micro_task_dirs["arithmetic"]), "--method", "full", "--budget", "1x", "--teacher", str(teacher_dir),
                  "--shard", str(i), "--shards", str(shards), "--out", str(outs[-1])])
        main(["lm-eval-merge", *map(str, outs), "--out", str(tmp_path / f"{tid}.json")])
        merged[tid] = json.loads((tmp_path / f"{tid}.json").read_text())
    s = merged["arithmetic-s"]
    assert (s["task"], s["task_id"], s["variant"], s["samples_per_doc"]) == ("loopkv_arithmetic", "arithmetic-s", "s", 2)
    assert s["decoding"]["strategy"] == "sampling" and s["decoding"]["top_p"] == 0.7
    assert s["doc_ids"] == merged["arithmetic"]["doc_ids"]          # the same documents as the greedy run
    assert merged["arithmetic"]["decoding"] == {"strategy": "greedy"} and merged["arithmetic"]["variant"] is None
    rows = table7.build_rows(list(merged.values()))
    spec = table7.spec(rows)
    assert dict(spec.columns)["arithmetic-s"] == "arith pass@1\nT=1.0 p=0.7\nn=2"
    assert rows[0]["arithmetic"] == merged["arithmetic"]["metrics"]["exact_match"]
    assert rows[0]["arithmetic-s"] == s["metrics"]["exact_match"]
    est = pass_at_k_interval([2] * s["n"], [sum(r["per_sample"]["exact_match"]) for r in s["samples"]], 1)
    assert (rows[0]["arithmetic-s_lo"], rows[0]["arithmetic-s_hi"]) == (est.lo, est.hi)
