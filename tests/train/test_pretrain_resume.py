"""Teacher pretraining of either family (Ouro; Huginn at a sampled depth from a random initial state):
learns, and a run interrupted after a checkpoint resumes to the same weights."""
import json

import pytest
import torch
from safetensors.torch import load_file

import loopkv.train.pretrain as pretrain_module
from loopkv.train.pretrain import pretrain

ARCH = {"hidden_size": 32, "num_hidden_layers": 2, "total_ut_steps": 2, "num_attention_heads": 2, "head_dim": 16,
        "intermediate_size": 64, "rope_theta": 10000.0, "max_position_embeddings": 256, "rms_norm_eps": 1e-6}
# as jobs/views.teacher_arch gives it: a core of 2 layers, 3 steps on average, gradient through the last 2
HUGINN_ARCH = {**ARCH, "family": "huginn", "total_ut_steps": 3, "prelude_layers": 1, "coda_layers": 1,
               "backprop_steps": 2}
ARCHS = {"ouro": ARCH, "huginn": HUGINN_ARCH}
PROGRESS = {"ouro": "expected_ce", "huginn": "ce"}   # the train loss each recipe reports
CFG = {"steps": 6, "batch_size": 4, "seq_len": 128, "lr": 3e-3, "min_lr_ratio": 0.1, "warmup_steps": 2,
       "weight_decay": 0.1, "grad_clip": 1.0, "entropy_beta": 0.05, "exit_prior": None,
       "mixture": {"corpus": 0.5, "passkey": 0.25, "arithmetic": 0.25},
       "checkpoint_every": 2, "eval_every": 3, "eval_batches": 1, "threads": 1}


@pytest.fixture(params=list(ARCHS))
def family(request):
    return request.param


def run(tmp_path, name, corpus_dir, tokenizer_dir, task_dirs, cfg=CFG, arch=ARCH):
    out, ck = tmp_path / name / "model", tmp_path / name / "ck"
    ck.mkdir(parents=True)
    tasks = {k: v for k, v in task_dirs.items() if k in ("passkey", "arithmetic")}
    curve = pretrain(cfg, arch, "float32", 11, corpus_dir, tokenizer_dir, tasks, out, ck, progress=False)
    return out, ck, curve


def test_resume_after_interruption_gives_bitwise_equal_weights(tmp_path, monkeypatch, corpus_dir,
                                                                tokenizer_dir, micro_task_dirs, family):
    arch = ARCHS[family]
    torch.manual_seed(3)   # the job's seeding is the run's own: what the process drew before must not matter
    whole, _, whole_curve = run(tmp_path, "whole", corpus_dir, tokenizer_dir, micro_task_dirs, arch=arch)

    real_save = pretrain_module.save_checkpoint
    saves = []

    def save_then_die(directory, state):
        real_save(directory, state)
        saves.append(state["step"])
        if state["step"] == 4:
            raise KeyboardInterrupt("simulated kill right after the step-4 checkpoint")

    monkeypatch.setattr(pretrain_module, "save_checkpoint", save_then_die)
    torch.manual_seed(4)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "killed", corpus_dir, tokenizer_dir, micro_task_dirs, arch=arch)
    monkeypatch.setattr(pretrain_module, "save_checkpoint", real_save)
    out = tmp_path / "killed" / "model"
    ck = tmp_path / "killed" / "ck"
    torch.manual_seed(5)
    resumed_curve = pretrain(CFG, arch, "float32", 11, corpus_dir, tokenizer_dir,
                             {k: micro_task_dirs[k] for k in ("passkey", "arithmetic")}, out, ck, progress=False)

    assert saves == [2, 4]
    a, b = load_file(whole / "model.safetensors"), load_file(out / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    strip = lambda c: [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in c["train"]]  # noqa: E731
    assert strip(resumed_curve) == strip(whole_curve)
    assert resumed_curve["val"] == whole_curve["val"]


def test_training_lowers_the_loss_and_saves_a_loadable_model(tmp_path, corpus_dir, tokenizer_dir, micro_task_dirs,
                                                            family):
    cfg = dict(CFG, steps=30, eval_every=30, checkpoint_every=30, lr=1e-2)
    arch = ARCHS[family]
    out, _, curve = run(tmp_path, "learn", corpus_dir, tokenizer_dir, micro_task_dirs, cfg, arch=arch)
    first = sum(r[PROGRESS[family]] for r in curve["train"][:3]) / 3
    last = sum(r[PROGRESS[family]] for r in curve["train"][-3:]) / 3
    assert last < first - 0.5
    from loopkv.models.loading import load_teacher

    model = load_teacher(out)
    assert model.config.total_ut_steps == arch["total_ut_steps"] and model.config.vocab_size == 300
    assert json.loads((out / "config.json").read_text())["model_type"] == {"ouro": "ouro", "huginn": "huginn_raven"}[family]
    if family == "huginn":   # held out: the CE at each test-time step count, 1 to 2T
        assert sorted(k for k in curve["val"][-1] if k.startswith("ce_at_")) == ["ce_at_1", "ce_at_2", "ce_at_3",
                                                                               "ce_at_4"]
        steps = [r["steps"] for r in curve["train"]]
        assert len(set(steps)) > 1 and all(r["grad_steps"] == min(r["steps"], 2) for r in curve["train"])
