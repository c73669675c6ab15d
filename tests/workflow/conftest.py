from pathlib import Path

import pytest

from workflow_helpers import copy_workflow, snakemake


@pytest.fixture
def workdir(tmp_path) -> Path:
    return copy_workflow(tmp_path)


@pytest.fixture(scope="session")
def finished(tmp_path_factory) -> Path:
    """The default DAG on the micro config, run for real once per session (slow tests share it)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("e2e"))
    snakemake(workdir, "--configfile", "micro.yaml")
    return workdir
