"""On-policy distillation (LLA Eq. 6-7): rows hold the student's own continuations, only positions
that drew a generated token count, the draw follows the codec's current state, and an interrupted
run resumes bitwise."""
import pytest
import torch
from run_compare import assert_same_run
from test_distill import CFG, VAL, calibration, lla, teacher, view_of  # noqa: F401  (fixtures)

from loopkv.cache.settings import cache_factory
from loopkv.train.distill import CodecDistiller, distill_codec
from loopkv.train.on_policy import generated_rows, on_policy_batches

OP = {**CFG, "max_new_tokens": 5, "temperature": 1.0}
PROMPTS = [[1, 5, 9, 12], [1, 7, 3], [1, 20, 21, 22, 23, 24], [1, 40]]


def test_rows_hold_prompt_plus_draw_and_weights_mark_the_drawn_positions():
    ids, weights = generated_rows([[1, 5, 6], [1, 9]], [[7, 8], [10, 11, 12]], max_new_tokens=3, eos_id=2,
                                  pad_id=0, seq_len=8)
    # row 0 stopped early: its eos is a drawn token too; row 1 used the whole budget
    assert ids.tolist() == [[1, 5, 6, 7, 8, 2, 0, 0], [1, 9, 10, 11, 12, 0, 0, 0]]
    # logits at p predict p + 1: row 0 draws at 3, 4, 5 -> positions 2, 3, 4
    assert weights.tolist() == [[0, 0, 1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0, 0, 0]]
    ids, weights = generated_rows([[1, 5, 6]], [[7, 8, 9]], 3, 2, 0, seq_len=4)   # truncated at seq_len
    assert ids.tolist() == [[1, 5, 6, 7]] and weights.tolist() == [[0, 0, 1, 0]]


def test_weighted_loss_counts_only_weighted_positions(teacher, calibration):  # noqa: F811
    distiller = CodecDistiller(teacher, view_of(teacher, calibration, lla(2, 3)), 0.5)
    weights = torch.zeros(VAL.shape)
    weights[:, 5:9] = 1
    full = CodecDistiller.forward(distiller, VAL)
    torch.manual_seed(3)   # Huginn's initial state: the distiller's first draw, repeated below
    part = CodecDistiller.forward(distiller, VAL, weights)
    assert float(part["kl"]) != pytest.approx(float(full["kl"]))
    # the weighted KL is the mean of the per-token KL over the weighted positions
    from loopkv.cache.full import FullLoopCache
    from loopkv.cache.teacher_forced import teacher_forced_forward
    from loopkv.eval.fidelity import distribution_match
    torch.manual_seed(3)
    run = teacher.loop_forward_kwargs(VAL)
    with torch.no_grad():
        t, trace = teacher_forced_forward(teacher, VAL, FullLoopCache(teacher.config), **run)
        s, _ = teacher_forced_forward(teacher, VAL, distiller.view, trace, **run)
    kl = distribution_match(t.logits, s.logits)["kl"][:, 5:9].mean()
    torch.testing.assert_close(part["kl"], kl, atol=1e-6, rtol=1e-5)


def test_the_draw_is_seeded_by_step_and_follows_the_codec(teacher, calibration):  # noqa: F811
    view = view_of(teacher, calibration, lla(2, 3))
    setting = lla(2, 3)
    batch = on_policy_batches(teacher, cache_factory(setting, teacher.config, view.codec, read_path="full"),
                              PROMPTS, {**OP, "seq_len": 16}, seed=5)
    first, again = batch(3), batch(3)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(batch(4)[0], first[0])
    assert float(first[1].sum()) > 0
    with torch.no_grad():                                   # a different codec state draws differently
        for p in view.codec.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    assert not torch.equal(batch(3)[0], first[0])


def test_each_rows_draw_is_its_own_and_ignores_the_global_generator(teacher, calibration):  # noqa: F811
    from loopkv.eval.generation import Sampling, generate
    from loopkv.utils.seeding import derive_seed

    factory = cache_factory(lla(2, 3), teacher.config, view_of(teacher, calibration, lla(2, 3)).codec, read_path="full")
    cfg = {**OP, "seq_len": 16, "batch_size": 3}
    torch.manual_seed(0)
    ids, _ = on_policy_batches(teacher, factory, PROMPTS, cfg, seed=5)(2)
    torch.manual_seed(1)                                    # the global generator plays no part
    again, _ = on_policy_batches(teacher, factory, PROMPTS, cfg, seed=5)(2)
    assert torch.equal(ids, again)
    if teacher.config.model_type == "huginn_raven":
        # Huginn's initial states are one draw per batch (of the step's seed), so a row's continuation
        # depends on its company: the draw is the step's, not the row's alone (stated in the note)
        assert not torch.equal(on_policy_batches(teacher, factory, PROMPTS, cfg, seed=5)(3)[0], ids)
        return
    # row i is what prompt i alone draws from its own seed (batch of one): no batch company effect
    for i, row in enumerate(ids.tolist()):
        prompt = next(p for p in PROMPTS if row[:len(p)] == p)   # the prompts differ in their second token
        alone = generate(teacher, [prompt], OP["max_new_tokens"], 1, factory, sampling=Sampling(temperature=1.0),
                         seeds=[derive_seed(5, "on-policy-draw", "2", str(i))])
        assert row[len(prompt):len(prompt) + len(alone[0])] == alone[0]


def _run(teacher, calibration, folder, dying_at=None):  # noqa: F811
    view = view_of(teacher, calibration, lla(2, 3))
    draw = on_policy_batches(teacher, cache_factory(lla(2, 3), teacher.config, view.codec, read_path="full"),
                             PROMPTS, {**OP, "seq_len": 16}, seed=5)

    def batches(step):
        if step == dying_at:
            raise KeyboardInterrupt
        return draw(step)

    return distill_codec({**OP, "seq_len": 16}, teacher, view, batches, VAL, folder, progress=False)


def test_interrupted_on_policy_run_resumes_bitwise(teacher, calibration, tmp_path):  # noqa: F811
    torch.manual_seed(7)   # each run is a job, which seeds itself (Huginn's training forwards draw)
    whole = _run(teacher, calibration, tmp_path / "whole")
    torch.manual_seed(7)
    with pytest.raises(KeyboardInterrupt):
        _run(teacher, calibration, tmp_path / "cut", dying_at=4)
    torch.manual_seed(8)   # the checkpoint's random state replaces a resumed job's own
    resumed = _run(teacher, calibration, tmp_path / "cut")
    assert_same_run(whole, resumed, "codec_state")


def test_on_policy_selection_scores_the_students_own_continuations(teacher, calibration):  # noqa: F811
    from loopkv.train.on_policy import on_policy_heldout

    width = teacher.config.total_ut_steps * teacher.config.head_dim
    for ranks, exact in (((width, width), True), ((2, 3), False)):
        view = view_of(teacher, calibration, lla(*ranks))
        distiller = CodecDistiller(teacher, view, 0.5)
        factory = cache_factory(lla(*ranks), teacher.config, view.codec, read_path="full")
        measured = on_policy_heldout(distiller, factory, PROMPTS, {**OP, "seq_len": 16}, VAL)
        assert measured["n_tokens"] > 0 and set(measured) >= {"kl", "top1", "window_kl"}
        if exact:    # a lossless codec: the student's continuations are the teacher's, scored identically
            assert measured["kl"] < 1e-6 and measured["top1"] == 1.0
        else:
            assert measured["kl"] > 1e-4


def test_math_prompts_take_worked_examples_of_other_problems_never_their_own(tmp_path):
    import json

    from loopkv.train.on_policy import prompt_texts

    rows = [{"prompt": f"Problem {i}", "shot": f"Problem {i} Solution {i}"} for i in range(6)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert prompt_texts("math_train", path, 0, 7) == [r["prompt"] for r in rows]
    shot = prompt_texts("math_train", path, 2, 7)
    assert shot == prompt_texts("math_train", path, 2, 7) != prompt_texts("math_train", path, 2, 8)
    for i, text in enumerate(shot):
        parts = text.split("\n\n")
        assert len(parts) == 3 and parts[-1] == f"Problem {i}"
        assert all(p.startswith("Problem ") and p != f"Problem {i} Solution {i}" for p in parts[:2])
