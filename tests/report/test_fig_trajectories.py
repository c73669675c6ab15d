"""LLA Figure 3 from cross-loop-structure's JSON: the fields it reads are checked, and the figure is
written byte-identically twice."""
import json

import pytest

from loopkv.errors import LoopKVError
from loopkv.report import fig_trajectories


def measured(loops=4, layers=3):
    kind = {"spectra": {"loop": {"mean_energy_by_direction": [0.8, 0.15, 0.04, 0.01][:loops],
                                 "normalized_effective_rank": 0.5, "first_direction_energy": 0.8},
                        "head": {"normalized_effective_rank": 0.9, "first_direction_energy": 0.4},
                        "layer": {"normalized_effective_rank": 0.9, "first_direction_energy": 0.4}},
            "convergence": {"cosine_to_final": [0.5, 0.9, 0.99, 1.0][:loops], "relative_change": [None, 0.5, 0.1, 0.01][:loops],
                            "cosine_to_final_by_layer": [[0.4 + 0.1 * layer, 0.9, 0.99, 1.0][:loops] for layer in range(layers)]},
            "loop_variance_share": 0.2}
    return {"k": kind, "v": json.loads(json.dumps(kind))}


def test_the_figure_is_written_byte_identically(tmp_path):
    m = measured()
    fig_trajectories.check(m, "x")
    fig_trajectories.plot(m, tmp_path / "f.pdf", tmp_path / "f.png", 60, "a tiny teacher")
    first = (tmp_path / "f.pdf").read_bytes()
    fig_trajectories.plot(m, tmp_path / "f.pdf", tmp_path / "f.png", 60, "a tiny teacher")
    assert first.startswith(b"%PDF") and (tmp_path / "f.pdf").read_bytes() == first
    assert (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("damage", ["no energy", "ragged layers", "no layers"])
def test_a_structure_without_what_it_draws_is_refused_by_name(damage):
    m = measured()
    if damage == "no energy":
        del m["v"]["spectra"]["loop"]["mean_energy_by_direction"]
    elif damage == "ragged layers":
        m["k"]["convergence"]["cosine_to_final_by_layer"][1] = [0.5, 1.0]
    else:
        m["k"]["convergence"]["cosine_to_final_by_layer"] = []
    with pytest.raises(LoopKVError, match="structure.json: [KV]"):
        fig_trajectories.check(m, "structure.json")
