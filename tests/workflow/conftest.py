from pathlib import Path

import pytest

from workflow_helpers import copy_workflow


@pytest.fixture
def workdir(tmp_path) -> Path:
    return copy_workflow(tmp_path)
