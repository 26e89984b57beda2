# env.sh: sourced on the GPU machine. Library paths for the staged binaries, mpirun flags, and NVLink
# multicast off in every environment we launch.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NCCL_PY=$(python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null || true)
export LD_LIBRARY_PATH="$NCCL_PY/lib:$(pwd)/.dev/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
MPIRUN="mpirun --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH"
# stage.sh ships the binaries gzipped (the carried tree is limited to 64 MiB): unpack them once
for gz in .dev/bin/*.gz; do
  [ -e "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"
done
