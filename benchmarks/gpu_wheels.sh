#!/usr/bin/env bash
# The wheels carried in .device/wheels (what the lent machine's Python lacks: benchmarks/gpu_pack.py), installed
# without an index into the machine's python3, pip's log in $1; a failure is said in one line. Run from the
# repository's root by gpu_call.sh, gpu_check.sh and gpu_experiments.sh (a wheel installed already stays as it is).
if compgen -G ".device/wheels/*.whl" > /dev/null; then
    python3 -m pip install -q --no-deps --no-index .device/wheels/*.whl > "$1" 2>&1 ||
        echo "gpu_wheels: pip could not install .device/wheels: $(grep -m1 -i error "$1")"
fi
