"""MELT's two training stages through the DeepSpeed engine: the loss is the definition, alpha = 0
costs nothing, training lowers the held-out KL, a killed run resumes bitwise."""
import pytest
import torch
from run_compare import assert_same_run

from loopkv.cache.melt import MeltCache
from loopkv.models import OuroConfig, OuroForCausalLM
from loopkv.models.melt_model import melt_from_teacher
from loopkv.train.melt import MeltDistiller, alpha_at, train_melt_stage

CFG = {"steps": 6, "batch_size": 4, "seq_len": 16, "lr": 3e-3, "warmup_steps": 1, "min_lr_ratio": 0.1,
       "weight_decay": 0.0, "grad_clip": 1.0, "zero_stage": 2, "eval_every": 2, "checkpoint_every": 2,
       "dtype": "float32", "alpha_ramp_steps": 3, "beta": 1.0}


@pytest.fixture(scope="module")
def teacher():
    config = OuroConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2, total_ut_steps=3,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=0.2)
    torch.manual_seed(0)
    return OuroForCausalLM(config).eval()


def batches(step):
    return torch.randint(3, 61, (CFG["batch_size"], CFG["seq_len"]), generator=torch.Generator().manual_seed(step))


VAL = torch.randint(3, 61, (4, 16), generator=torch.Generator().manual_seed(99))


def test_alpha_ramps_from_zero_to_one():
    assert [alpha_at(s, 3) for s in range(5)] == [0.0, 0.5, 1.0, 1.0, 1.0]
    assert alpha_at(0, 0) == 1.0


def test_alpha_zero_student_costs_nothing(teacher):
    distiller = MeltDistiller(teacher, melt_from_teacher(teacher, "full", chunk_size=4), beta=1.0)
    distiller.alpha = 0.0
    terms = distiller(VAL)
    # float32 round-off only: the teacher side attends through the teacher-forced path, the student through SDPA
    assert float(terms["loss"].detach()) < 1e-7 and float(terms["attn"]) < 1e-10 and float(terms["top1"]) == 1.0


def test_loss_terms_are_the_definitions(teacher):
    student = melt_from_teacher(teacher, "full", chunk_size=4)
    terms = MeltDistiller(teacher, student, beta=0.7)(VAL)
    with torch.no_grad():
        t = teacher(VAL, output_loop_logits=True)
        cache = MeltCache(student.config, record_outputs=True)
        s = student(VAL, cache=cache, output_loop_logits=True)
        kls = [(a.softmax(-1) * (a.log_softmax(-1) - b.log_softmax(-1))).sum(-1).mean()
               for a, b in zip(t.loop_logits, s.loop_logits)]
        from loopkv.cache.full import FullLoopCache
        from loopkv.cache.teacher_forced import teacher_forced_forward
        _, trace = teacher_forced_forward(teacher, VAL, FullLoopCache(teacher.config))
        attn = sum(((cache.outputs[k] - trace.outputs[k]) ** 2).mean() for k in trace.outputs) / len(trace.outputs)
    kd = sum(kls) / len(kls)
    torch.testing.assert_close(terms["kd"], kd, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(terms["kl"], kls[-1], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(terms["attn"], attn, atol=1e-8, rtol=1e-5)
    torch.testing.assert_close(terms["loss"].detach(), kd + 0.7 * attn, atol=1e-6, rtol=1e-5)
    assert float(kd) > 1e-4 and float(attn) > 1e-6


@pytest.mark.parametrize("stage", [1, 2])
def test_stage_lowers_heldout_kl_and_returns_the_best(teacher, tmp_path, stage):
    """The mechanics, on the windows it is measured on: a whole-model update on a random teacher's
    random tokens does not generalise in 10 steps, so fresh batches would test the data, not the code."""
    student = melt_from_teacher(teacher, "full", chunk_size=4)
    result = train_melt_stage({**CFG, "steps": 10}, teacher, student, stage, lambda step: VAL, VAL,
                              tmp_path / "ck", progress=False)
    heldout = result["curve"]["heldout"]
    assert [p["step"] for p in heldout] == [0, 2, 4, 6, 8, 10]
    assert min(p["kl"] for p in heldout[1:]) < heldout[0]["kl"]
    assert result["best"]["kl"] == min(p["kl"] for p in heldout)
    alphas = [row["alpha"] for row in result["curve"]["train"]]
    assert alphas[:3] == ([0.0, 0.5, 1.0] if stage == 1 else [1.0] * 3)
    assert ("attn" in result["curve"]["train"][0]) == (stage == 2)
    assert all(p.requires_grad is False for p in teacher.parameters())


def test_interrupted_stage_resumes_bitwise(teacher, tmp_path):
    def run(directory, feed):
        student = melt_from_teacher(teacher, "single", chunk_size=8)
        return train_melt_stage(CFG, teacher, student, 1, feed, VAL, directory, progress=False)

    whole = run(tmp_path / "whole", batches)

    def dying(step):
        if step == 4:
            raise KeyboardInterrupt
        return batches(step)

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", dying)
    resumed = run(tmp_path / "cut", batches)
    assert_same_run(whole, resumed, "state")
