"""A teacher's held-out measurement as its family defines it: Ouro's per-loop CE, Huginn's CE at each
test-time step count (every count from the same initial states, the same ones at every measurement)."""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import small_huginn, small_model  # noqa: E402

from loopkv.eval.heldout import eval_steps, family_heldout  # noqa: E402
from loopkv.utils.seeding import MEASUREMENT_SEED  # noqa: E402


def test_huginn_is_measured_at_every_step_count_from_one_start():
    model = small_huginn(steps=3, layers=2, heads=2, head_dim=8, std=0.2)
    windows = torch.randint(3, 60, (3, 9), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(5)
    got = family_heldout(model, windows, batch_size=2)
    after = torch.rand(1)
    assert eval_steps(3) == [1, 2, 3, 4] and set(got) == {"ce", "ce_at_1", "ce_at_2", "ce_at_3", "ce_at_4"}
    assert got["ce"] == got["ce_at_3"]
    # the reference: the CE of each batch's logits from the states the seed draws first (batch by batch)
    torch.manual_seed(MEASUREMENT_SEED)
    starts = [model.loop_forward_kwargs(windows[i:i + 2, :-1])["input_states"] for i in (0, 2)]
    for n in (1, 4):
        with torch.no_grad():
            logits = torch.cat([model(windows[i:i + 2, :-1], num_steps=n, input_states=s).logits.flatten(0, 1)
                                for i, s in zip((0, 2), starts)])
        want = F.cross_entropy(logits, torch.cat([windows[0:2, 1:].flatten(), windows[2:3, 1:].flatten()]))
        assert abs(got[f"ce_at_{n}"] - float(want)) < 1e-5
    torch.manual_seed(6)
    assert family_heldout(model, windows, batch_size=2) == got          # the same draws, whatever came before
    torch.manual_seed(5)
    torch.testing.assert_close(torch.rand(1), after, rtol=0, atol=0)    # and training's stream left as it was


def test_ouro_is_measured_per_loop():
    model = small_model()
    windows = torch.randint(3, 60, (2, 9), generator=torch.Generator().manual_seed(0))
    got = family_heldout(model, windows, batch_size=2)
    assert len(got["per_loop_ce"]) == model.config.total_ut_steps and got["final_loop_ce"] == got["per_loop_ce"][-1]
