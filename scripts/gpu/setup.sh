# Sourced by run_tests.sh and run_cli.sh on the GPU machine: SETUP PACK_DIR LOG_DIR.
# Recreates the build's paths (/work/main, /work/shared, /work/cuda-target), unpacks the
# binaries, and points the loader at the CUDA libraries of PyTorch's pip packages
# (cuBLAS, cuRAND, NVRTC, the runtime); libcuda comes with the driver.
pack=$(realpath "$1"); logs=$(realpath -m "$2"); mkdir -p "$logs"
repo=$(pwd)
mkdir -p /work
[ "$repo" = /work/main ] || ln -sfn "$repo" /work/main
[ -d "$pack/shared" ] && ln -sfn "$pack/shared" /work/shared
"$pack/zstd" -d -q --long=31 -c "$pack/bins.tar.zst" | tar -C / -xf -
# cuBLAS, cuRAND, NVRTC and the CUDA runtime from PyTorch's pip packages.
nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]) if hasattr(nvidia, "__path__") else "")' 2>/dev/null)
export LD_LIBRARY_PATH=$(ls -d "$nv"/nvidia/*/lib /usr/local/nvidia/lib64 2>/dev/null | tr "\n" ":")${LD_LIBRARY_PATH:-}
export WORKBOOK_PYTHON=python3 RUST_BACKTRACE=1 WORKBOOK_REQUIRE_SHARED=1
