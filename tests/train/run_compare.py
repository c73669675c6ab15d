"""Comparing a training run that was killed and resumed with an uninterrupted one."""
import torch


def assert_same_run(whole: dict, resumed: dict, state_key: str) -> None:
    """Bitwise-equal kept state, equal curves (wall-clock seconds aside)."""
    for key, value in whole[state_key].items():
        assert torch.equal(value, resumed[state_key][key]), key

    def timeless(curve):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in curve]

    assert timeless(whole["curve"]["train"]) == timeless(resumed["curve"]["train"])
    assert whole["curve"]["heldout"] == resumed["curve"]["heldout"]
