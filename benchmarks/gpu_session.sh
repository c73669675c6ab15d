#!/usr/bin/env bash
# The GPU checks of one short device session, in order of value, each bounded by its own timeout so
# one failure or overrun leaves the rest: the latent-attention kernel (correctness in float32 and
# bf16, then LLA Table 13's timings), the serving benchmark at Ouro-1.4B's architecture (random
# weights) and at the configured (embedded) one, then the kernel's launch settings swept (GPU time).
#   [ONLY="kernel serve_1.4b"] bash benchmarks/gpu_session.sh OUT_DIR        (needs a CUDA device; PYTHONPATH=src if not installed)
set -u
out=${1:?output folder}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:-}:src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
nvidia-smi -L
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
step() {   # name, seconds, command...
    local name=$1 limit=$2; shift 2
    [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]] && return   # ONLY="serve_1.4b ...": a subset
    echo "== $name (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    echo "   exit $? after $((SECONDS - start))s"; tail -n 40 "$out/$name.log"
}
step kernel 120 python3 benchmarks/latent_kernel.py --contexts 4096 32768 262144 --out "$out/kernel.json"
step serve_1.4b 240 python3 benchmarks/serving.py --device cuda --arch ouro-1.4b --context 4096 --gpu-memory-mb 100000 \
    --batch-sizes 1 8 32 --prompt-len 1024 --new-tokens 16 --rounds 2 --out "$out/serve_1.4b.json"
step serve_default 90 python3 benchmarks/serving.py --device cuda --rounds 2 --gpu-memory-mb 100000 --out "$out/serve_default.json"
step absorbed 120 python3 benchmarks/absorbed_attention.py --device cuda --contexts 4096 32768 262144 --rounds 5
step sweep 150 python3 benchmarks/latent_kernel_sweep.py --contexts 4096 32768 262144 --out "$out/sweep.json"
