"""Every registered KV method through the same checks (tests/cache/method_checks.py): lossless at its
lossless setting, bytes per token = its formula = the bytes its cache object holds, streaming decode =
its teacher-forced view, a row's result independent of the other rows of its batch and of left padding,
a prefilled row selected into several (reorder_cache) as good as prefilling each,
on each model family (Ouro; Huginn, with non-looped layers and interleaved RoPE).
The methods and their read paths come from the registry, so a new method's file is all it takes to be
covered; a check that does not apply to a method is stated, with why, in its class's `not_checked` (and
checked to be true here), a known defect in its `known_failures` (a strict xfail), never listed here."""
import pytest
import yaml

from method_checks import CHECK, cases, check_exemptions, compressed_setting, served, serves, teacher, variants
from loopkv.cache.budget import CacheShape, setting_at_ratio
from loopkv.cache.registry import METHODS, config_keys, method_labels
from loopkv.errors import LoopKVError

# the fixtures (tests/conftest.py) of each family's reference checkpoint: (model, directory)
REFERENCE_FIXTURES = {"ouro": ("reference_model", "reference_dir"),
                      "huginn": ("huginn_reference_model", "huginn_reference_dir")}


@pytest.mark.parametrize("family, method, read_path", cases("lossless"))
def test_lossless_setting_gives_the_reference_logits(family, method, read_path, request):
    model, directory = (request.getfixturevalue(name) for name in REFERENCE_FIXTURES[family])
    CHECK["lossless"](method, read_path, model, directory, family)


@pytest.mark.parametrize("family, method, read_path", cases("bytes"))
def test_bytes_per_token_are_the_formula_and_what_the_cache_holds(family, method, read_path):
    CHECK["bytes"](method, read_path, family)


@pytest.mark.parametrize("family, method, read_path", cases("teacher_forced"))
def test_streaming_decode_is_the_teacher_forced_view(family, method, read_path):
    CHECK["teacher_forced"](method, read_path, family)


@pytest.mark.parametrize("family, method, read_path", cases("batch"))
def test_a_row_does_not_depend_on_the_other_rows_of_its_batch(family, method, read_path):
    CHECK["batch"](method, read_path, family)


@pytest.mark.parametrize("family, method, read_path", cases("padding"))
def test_a_row_does_not_depend_on_left_padding(family, method, read_path):
    CHECK["padding"](method, read_path, family)


@pytest.mark.parametrize("family, method, read_path", cases("rows"))
def test_a_prefilled_row_serves_several_continuations(family, method, read_path):
    CHECK["rows"](method, read_path, family)


@pytest.mark.parametrize("method", [m for m in METHODS if not serves(m, "huginn")])
def test_a_method_that_does_not_serve_huginn_is_refused_with_why(method):
    cls = METHODS[method]
    assert len(cls.outer_layers_refused.split()) >= 4, f"{method}: say why it does not serve Huginn"
    with pytest.raises(LoopKVError, match="non-looped layers"):
        served(method, variants([method])[0][1], teacher(family="huginn"))


@pytest.mark.parametrize("method", list(METHODS))
def test_what_a_method_does_not_check_is_stated_and_true(method):
    check_exemptions(method)


@pytest.mark.parametrize("method", list(METHODS))
def test_a_method_states_what_the_rest_of_loopkv_reads(method):
    """Its label, a setting its budget rule gives on the test model, its config keys present in the
    default config (the workflow slices them from it), read paths with methods.read_path when served."""
    cls = METHODS[method]
    assert cls.label and list(method_labels().values()).count(cls.label) == 1
    config = teacher().config
    setting = compressed_setting(method, config)
    assert setting_at_ratio(method, CacheShape.of(config), setting["ratio"]) is not None
    methods_cfg = yaml.safe_load(open("config/config.yaml"))["methods"]
    for key in config_keys(method, served=True):
        assert key.removeprefix("methods.") in methods_cfg, f"{method} reads {key}, which config/config.yaml lacks"
    assert ("methods.read_path" in cls.served_config_keys) == bool(cls.read_paths)
    if cls.read_paths:
        assert methods_cfg["read_path"] in cls.read_paths
