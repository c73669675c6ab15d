import os

# Triton kernels run in its interpreter on CPU; the flag is read when triton is imported, which
# importing torch may already do, so it is set before anything else (the GPU benchmark compiles).
os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from loopkv.data.corpus import build_corpus  # noqa: E402
from loopkv.data.tokenizer import load_tokenizer, train_tokenizer  # noqa: E402

# offline always: nothing in the suite may reach a hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE = FIXTURES / "ouro-tiny-reference"
HUGINN_REFERENCE = FIXTURES / "huginn-tiny-reference"   # outputs of the Huginn authors' own code


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return REFERENCE


@pytest.fixture(scope="session")
def reference_model():
    import loopkv.models.modeling_ouro  # noqa: F401  (registers model type "ouro")
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(REFERENCE).eval()


@pytest.fixture(scope="session")
def huginn_reference_dir() -> Path:
    return HUGINN_REFERENCE


@pytest.fixture(scope="session")
def huginn_reference_model():
    import loopkv.models.modeling_huginn  # noqa: F401  (registers model type "huginn_raven")
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(HUGINN_REFERENCE).eval()


@pytest.fixture(scope="session")
def bigbench_sdist(tmp_path_factory) -> Path:
    """A stand-in for BIG-bench's sdist in its own layout (tests/bigbench_sdist.py): PyPI no longer serves it."""
    from bigbench_sdist import write_sdist

    return write_sdist(tmp_path_factory.mktemp("bigbench") / "bigbench-1.0.0.tar.gz")


# -- data: the real Shakespeare corpus split once, a tiny tokenizer on a slice of it --------
CORPUS_CFG = {"sources": ["shakespeare"], "text_files": [], "block_lines": 40,
              "val_fraction": 0.05, "test_fraction": 0.05}
TINY_TOKENIZER_CFG = {"kind": "bpe", "vocab_size": 300, "path": None}
SLICE_CHARS = 60_000


@pytest.fixture
def corpus_cfg():
    return dict(CORPUS_CFG)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    build_corpus(CORPUS_CFG, 7, out)
    return out


@pytest.fixture(scope="session")
def train_slice(corpus_dir, tmp_path_factory):
    """The first few pages of the train split: enough to train a tiny tokenizer quickly."""
    text = (corpus_dir / "train.txt").read_text()
    path = tmp_path_factory.mktemp("slice") / "train_slice.txt"
    path.write_text(text[:text.rindex("\n", 0, SLICE_CHARS) + 1])
    return path


@pytest.fixture(scope="session")
def tokenizer_dir(train_slice, tmp_path_factory):
    out = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(TINY_TOKENIZER_CFG, train_slice, out)
    return out


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


MICRO_TASKS = {
    "passkey": {"train_examples": 60, "eval_trials": 3, "train_lengths": [100, 120], "eval_lengths": [100, 120],
                "key_digits": 5, "filler": "classic"},
    "arithmetic": {"train_examples": 200, "eval_examples": 8, "min_steps": 2, "max_steps": 3,
                   "max_operand": 9, "max_value": 99, "ops_per_line": 1},
    "cloze": {"eval_examples": 8, "num_choices": 4, "context_words": 24, "continuation_words": 6},
}


@pytest.fixture(scope="session")
def micro_task_dirs(corpus_dir, tokenizer_dir, tmp_path_factory):
    """Small passkey/arithmetic/cloze sets on the tiny tokenizer, built once."""
    from loopkv.data.tasks import build_task

    dirs = {}
    for name, cfg in MICRO_TASKS.items():
        out = tmp_path_factory.mktemp(f"task-{name}")
        build_task(name, cfg, 7, corpus_dir, tokenizer_dir, out)
        dirs[name] = out
    return dirs


# In CI (.ci/run sets LOOPKV_NO_SKIPS=1) every test is required: the sandbox, SLURM, MKL and kernel
# tests skip elsewhere when the machine lacks what they need, and a skip there must not pass as green.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("LOOPKV_NO_SKIPS") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every test is required: {reason}"


# Under pytest-xdist (`make test` runs two workers), tests go to workers a file at a time, so a module's
# fixture (a DAG run, a trained model) is built once; the files that read the shared micro DAG
# (`finished`, tests/workflow/conftest.py) go together to one worker, which builds it once; a file
# whose tests share nothing costly is spread test by test. The end-to-end tests are scheduled first:
# they are the long ones, and started last they would leave a worker idle. (xdist's own `loadgroup`
# marks do not group under pytest 9, whose node ids xdist 3.8 cannot suffix: hence a scheduler.)
READ_THE_MICRO_DAG = {f"tests/workflow/test_{name}.py" for name in (
    "declared_reruns", "determinism", "end_to_end", "kill_dag", "kill_resume", "launch_ranks", "report_html")}
SPREAD_PER_TEST = {"tests/test_device_placement.py"}   # ~6 minutes of independent lazy-device decodes


def _scope(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    return "micro DAG" if path in READ_THE_MICRO_DAG else nodeid if path in SPREAD_PER_TEST else path


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFixtureCost(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False   # keep the collection's order (slow first), not most tests first
    return ByFixtureCost(config, log)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):   # an xdist worker (the controller collects nothing)
        return
    outside = sorted({i.nodeid.split("::")[0] for i in items if "finished" in i.fixturenames} - READ_THE_MICRO_DAG)
    if outside:
        raise pytest.UsageError(f"tests/conftest.py: add {outside} to READ_THE_MICRO_DAG (they read `finished`)")
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
