"""Figure 8 / Table 12: grid cells from per-document results, the reliable-length boundary."""
import pytest

from loopkv.report.fig_passkey import grid, reliable_length, table_rows


def _data(lengths, depths, trials):
    return [{"meta": {"length": L, "depth": d}} for L in lengths for d in depths for _ in range(trials)]


def _result(data, correct, method="lla", ratio=4.0):
    return {"method": method, "budget": "4x", "setting": {"ratio": ratio},
            "samples": [{"doc_id": i, "accuracy": float(correct(r["meta"]))} for i, r in enumerate(data)]}


def test_cells_average_trials_and_the_boundary_is_drawn_on_cells_pooled_over_depths():
    data = _data([64, 128, 256], [0.0, 0.5, 1.0], 4)
    # perfect at 64; at 128 depth 0.5 fails one of four trials (0.75 < 0.9); 256 all wrong
    seen = {}

    def correct(meta):
        key = (meta["length"], meta["depth"])
        seen[key] = seen.get(key, 0) + 1
        return meta["length"] == 64 or (meta["length"] == 128 and not (meta["depth"] == 0.5 and seen[key] == 1))

    cells = grid(data, _result(data, correct))
    assert cells["lengths"] == [64, 128, 256] and cells["depths"] == [0.0, 0.5, 1.0]
    assert cells["accuracy"][1] == [1.0, 0.75, 0.0] and cells["n"][0] == [4, 4, 4]
    # the paper's cell is (ratio, length) over all depths: 11 of 12 trials at 128 (.917 >= .9)
    assert reliable_length(cells, 0.9) == 128
    assert reliable_length(cells, 0.95) == 64
    # every (depth, length) cell: stricter, the one 0.75 depth ends it
    assert reliable_length(cells, 0.9, every_depth=True) == 64
    assert reliable_length(cells, 0.75, every_depth=True) == 128
    assert reliable_length({**cells, "accuracy": [[0.0] * 3] * 3}, 0.9) is None
    rows, spec = table_rows([_result(data, correct)], [cells], 0.9)
    assert rows[0]["len_128"] == pytest.approx(11 / 12) and rows[0]["paper"] == ".87 at 64k"   # lla at 4x
    assert (rows[0]["reliable_length"], rows[0]["reliable_every_depth"]) == (128, 64)
    assert (rows[0]["n_per_cell"], rows[0]["n_per_depth_cell"]) == (12, 4)
    assert "len_256" in spec.keys
    # the paper's other rows, Figure 8's 14.2x and 15.5x included, are shown as not run
    assert sorted(r["ratio"] for r in rows[1:] if r["budget"] == "not run") == [1.0, 5.33, 10.67, 14.2, 15.5, 21.33]


def test_a_grid_with_an_empty_cell_is_an_error():
    data = _data([64, 128], [0.0], 1)
    result = _result(data, lambda m: True)
    result["samples"] = result["samples"][:1]
    with pytest.raises(ValueError, match="no documents"):
        grid(data, result)


def test_a_ratio_the_paper_prints_to_one_decimal_finds_its_row_and_the_2_6b_grid_is_selectable():
    data = _data([64, 128], [0.0], 1)
    r142 = _result(data, lambda m: True, ratio=1024 / 72)   # 14.22x: the paper's "14.2x"
    cells = [grid(data, r142)]
    rows, _ = table_rows([r142], cells, 0.9)
    assert rows[0]["paper"] == "drops after 8k (Fig. 8)"
    assert 14.2 not in [r["ratio"] for r in rows[1:]]      # not also shown as a paper row not run
    rows, _ = table_rows([_result(data, lambda m: True, ratio=10.666667)], cells, 0.9, paper_model="Ouro-2.6B")
    assert rows[0]["paper"] == "1.00 to 32k, OOM (not 0) at 64k" and len(rows) == 1
