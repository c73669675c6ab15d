"""MELT recipes: what each stage job depends on, which jobs recipes share, table membership."""
import pytest
import yaml

from loopkv.config import load_config
from loopkv.errors import LoopKVError
from loopkv.train.melt_recipes import final_stage, recipe, recipe_names, stage_cfg, stage_owner, table_members


@pytest.fixture(scope="module")
def melt():
    return load_config(yaml.safe_load(open("config/config.yaml")))["melt"]


def test_no_stage2_shares_the_full_recipes_stage1_and_stops_there(melt):
    assert final_stage(melt, "no_stage2") == 1 and final_stage(melt, "full") == 2
    assert stage_owner(melt, "no_stage2", 1) == "full"
    assert all(stage_owner(melt, n, 1) == n for n in recipe_names(melt) if n != "no_stage2")


def test_stage2_depends_on_everything_stage1_did(melt):
    """no_interp's stage 2 has the same own settings as full's but starts from another stage 1."""
    assert stage_cfg(melt, "no_interp", 2)["init"]["alpha_ramp_steps"] == 0
    assert stage_cfg(melt, "no_interp", 2) != stage_cfg(melt, "full", 2)
    assert stage_owner(melt, "no_interp", 2) == "no_interp"


def test_stage_slices_hold_only_what_the_stage_reads(melt):
    one = stage_cfg(melt, "full", 1)
    assert "beta" not in one and "ablations" not in one and "memory_lengths" not in one
    assert "ema_decay" not in one and stage_cfg(melt, "gate_ema", 1)["ema_decay"] == melt["ema_decay"]
    assert stage_cfg(melt, "no_chunk", 1)["chunk_size"] is None
    edited = {**melt, "stage2": {**melt["stage2"], "beta": 2.0}}
    assert stage_cfg(edited, "full", 1) == one and stage_cfg(edited, "full", 2) != stage_cfg(melt, "full", 2)


def test_tables_hold_the_papers_rows(melt):
    assert table_members(melt, 3) == ["full", "gate_single", "gate_last", "gate_ema", "gate_mean"]
    assert table_members(melt, 4) == ["full", "no_chunk", "no_interp", "no_stage2"]
    assert recipe(melt, "gate_ema")["gate"] == "ema" and recipe(melt, "no_chunk")["gate"] == "full"


def test_unknown_recipes_and_keys_are_errors(melt):
    with pytest.raises(LoopKVError, match="unknown MELT recipe"):
        recipe(melt, "no_such")
    with pytest.raises(LoopKVError, match="unknown keys"):
        recipe({**melt, "ablations": {"x": {"lr": 1.0}}}, "x")
