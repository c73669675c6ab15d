"""Figure 2/4's caption of the head- vs loop-axis SVD error: the ratios arrive as a result file's
string keys, and the largest ratio is the largest number, not the last key in sorted order."""
from loopkv.report.fig_cross_loop import axis_error_caption


def _cell(k: float, v: float) -> dict:
    return {"k": {"head_over_loop": k}, "v": {"head_over_loop": v}}


def test_largest_ratio_is_by_value_not_string_order():
    # json.dump(sort_keys=True) writes "16x" < "32x" < "8x"
    errors = {"16x": _cell(1220.0, 1096.0), "32x": _cell(159.0, 141.0), "8x": _cell(3.0, 2.0)}
    assert axis_error_caption(errors) == ("SVD error at equal budget, head axis / loop axis: "
                                          "16x: K 1220.0x, V 1096.0x; 32x: K 159.0x, V 141.0x")


def test_sixteen_shown_once_when_it_is_the_largest():
    errors = {"16x": _cell(5.0, 4.0), "4x": _cell(2.0, 1.5)}
    assert axis_error_caption(errors).endswith("16x: K 5.0x, V 4.0x")
    assert axis_error_caption(errors).count("16x") == 1


def test_no_errors_no_caption():
    assert axis_error_caption(None) == ""
    assert axis_error_caption({}) == ""
