# env.sh: sourced by scripts/device/node.sh (and the step scripts it runs) on the GPU node, from the repository
# root. Sets DEV (the staged binaries and libraries, default .dev: scripts/device/stage.sh), the library paths,
# MPIRUN (every launch goes through it) and NVLink multicast off in every environment we launch: it can take shared
# GPUs down (NCCL_NVLS_ENABLE=0 is exported and passed to every rank explicitly).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DEV=${MOK_DEV:-.dev}
# NCCL: MOK_NCCL_LIB (a directory) when set, else the python wheel's (nvidia-nccl-cu13) when the node has it: a
# node's system NCCL may be older than the one the binaries were built against. Libraries staged in $DEV/lib come
# first: they are there because the node lacks them.
NCCL_LIB=${MOK_NCCL_LIB:-}
if [ -z "$NCCL_LIB" ]; then
  NCCL_PY=$(python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])" 2> /dev/null || true)
  [ -n "$NCCL_PY" ] && NCCL_LIB=$NCCL_PY/lib
fi
case $DEV in /*) DEV_LIB=$DEV/lib;; *) DEV_LIB=$(pwd)/$DEV/lib;; esac
export LD_LIBRARY_PATH="$DEV_LIB${NCCL_LIB:+:$NCCL_LIB}:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
MPIRUN="mpirun --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH -x PATH"
# stage.sh ships the binaries gzipped (a carried tree may be size-limited): unpack them once
for gz in "$DEV"/bin/*.gz; do
  [ -e "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"
done
