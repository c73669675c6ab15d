#!/usr/bin/env bash
# The paper path at Ouro-1.4B's real size on one GPU, in about ten minutes: a random-weight checkpoint
# in the published layout (loopkv random-checkpoint), then config/ouro-1.4b.yaml's DAG with the counts
# of benchmarks/gpu_smoke.yaml, one job of each model-computing stage; writes OUT/gpu_smoke.json (per
# stage: wall time, peak GPU memory; training step times; Table 5's bytes, capacity and decode
# throughput at real size) and OUT/logs.txt (every job log's tail).
#   [WHEELS=.gpu_wheels] bash benchmarks/gpu_smoke.sh OUT       (WHEELS: benchmarks/gpu_wheels.sh's folder,
#                                                                for a machine with no network)
set -uo pipefail
out=${1:?output folder}
limit=${LIMIT:-540}                          # seconds for the DAG; the summary is written either way
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/loopkv-gpu-smoke}
mkdir -p "$out" && rm -rf "$work" && mkdir -p "$work"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset TRITON_INTERPRET
py=${PYTHON:-python3}
if [ -n "${WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl || exit 1   # exactly this environment's set
fi
"$py" -m pip install -q --no-deps --no-build-isolation -e "$repo" || exit 1
bin=$(dirname "$(command -v "$py")")
export PATH=$bin:$PATH
nvidia-smi -L
"$py" -c "import torch, transformers, deepspeed; print('torch', torch.__version__, 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__, torch.cuda.get_device_name())"
for name in Snakefile workflow config benchmarks; do cp -r "$repo/$name" "$work/"; done
cd "$work"
start=$SECONDS
"$py" -m loopkv random-checkpoint --config config/ouro-1.4b.yaml --config benchmarks/gpu_smoke.yaml \
    --out checkpoints/Ouro-1.4B --text-chars 3000000 || exit 1
echo "checkpoint: $((SECONDS - start)) s"
R=results/ouro-1.4b
targets=($(grep -v '^#' benchmarks/gpu_smoke_targets.txt | sed "s|^|$R/|"))
# three jobs at a time on the one GPU (141 GB): the order is the DAG's
timeout "$limit" snakemake --cores 16 --jobs 3 --scheduler greedy --configfile config/ouro-1.4b.yaml benchmarks/gpu_smoke.yaml \
    --keep-going -- "${targets[@]}" > "$out/snakemake.log" 2>&1
echo "snakemake exit $? after $((SECONDS - start)) s"
"$py" "$repo/benchmarks/gpu_smoke_summary.py" "$R" logs/ouro-1.4b --out "$out/gpu_smoke.json"
for f in $(find logs/ouro-1.4b -name '*.log' | sort); do echo "== $f"; tail -n 15 "$f"; done > "$out/logs.txt"
tail -n 30 "$out/snakemake.log"
