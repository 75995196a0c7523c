#!/usr/bin/env bash
# bench/gpu.sh: the GPU checks and figures, in one command of at most ~12 minutes on a machine
# with an NVIDIA GPU. Run from the repository root:
#
#     bash bench/gpu.sh [OUT_DIR]
#
# 1. Python environment. With network access it installs the CUDA extra into .venv-gpu
#    (pip install -e ".[cuda,dev]"). Without it (a sandboxed GPU machine whose image already
#    holds jax with its CUDA plugin, torch and flax), it installs the wheels found in .whl/
#    into /tmp/site without dependencies and uses the image's python3; fetch those wheels
#    beforehand on a machine with PyPI (the pins of pyproject.toml, for the GPU machine's
#    Python and platform), e.g.
#        pip download --no-deps --only-binary=:all: --python-version 3.12 \
#            --platform manylinux_2_28_x86_64 -d .whl mujoco==3.17.0 mujoco-mjx==3.17.0 \
#            orbax-checkpoint==0.12.8 tensorboard==2.21.0
# 2. The GPU-only tests: tests/torch/test_cuda.py (the double-buffer runner's pinned slots
#    and copy stream; NCCL learner ranks when there are 2 GPUs) and the JAX core's
#    device-dependent tests (1 vs 2 devices are forced host devices there: CPU only).
# 3. bench/speed/learner.py (reference sizes), bench/speed/envs.py --robots at 4096 and 8192 envs,
#    bench/speed/profile.py --sizes reference, and a short G1WalkFlat training run at the gpu
#    preset; each script records its GPU section in bench/RESULTS.md.
# Everything it prints also goes to OUT_DIR/gpu.log (default: $OUT when set, else bench/);
# bench/RESULTS.md is copied there too.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-bench}}"
mkdir -p "$out"
log="$out/gpu.log"
exec > >(tee "$log") 2>&1
export PYTHONUNBUFFERED=1 MUJOCO_GL=egl UNILAB_JAX_COMPILATION_CACHE=0
step() { echo; echo "=== $(date +%T) $*"; }
run() { # run with a timeout; a failure is reported and the script goes on
    local limit=$1; shift
    timeout "$limit" "$@"; local rc=$?
    [ $rc -eq 0 ] || echo "!!! exit $rc: $*"
    return 0
}

step "environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"
if python3 -m pip download --no-deps -q -d /tmp/probe pip >/dev/null 2>&1; then
    python3 -m venv .venv-gpu && .venv-gpu/bin/pip install -q -e ".[cuda,dev]"
    py=.venv-gpu/bin/python
else
    if ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl
        export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    else
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    fi
    py=python3
fi
$py - <<'EOF'
import jax, torch
print("jax", jax.__version__, jax.devices(), "| torch", torch.__version__,
      "cuda", torch.cuda.is_available(), torch.cuda.device_count())
EOF

step "GPU-only tests"
run 240 $py -m pytest -q -p no:cacheprovider tests/torch/test_cuda.py
run 240 $py -m pytest -q -p no:cacheprovider tests/test_sac.py tests/test_td3.py tests/test_c51.py

step "bench/speed/learner.py (reference sizes)"
run 180 $py -m bench.speed.learner --repeats 5
step "bench/speed/envs.py --robots (4096 and 8192 envs)"
run 240 $py -m bench.speed.envs --robots --devices 1 --num-envs 4096 8192 --skip-train --timeout 200
step "bench/speed/profile.py --sizes reference"
run 180 $py -m bench.speed.profile --sizes reference --repeats 3
step "G1WalkFlat, gpu preset, 300 iterations"
run 240 $py -m unilab_jax.train --env G1WalkFlat --preset gpu --max-iterations 300 \
    --log-interval 50 --eval-interval 0 --save-interval 0 --log-dir /tmp/g1_gpu

cp bench/RESULTS.md "$out/" 2>/dev/null || true
step "done"
