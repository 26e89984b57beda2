# Shared by the shell tests: mpirun flags that work as root, on one host, without a network.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 # never NVLink multicast (shared hosts)
MPIRUN="mpirun --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH -x PATH"
fail() { echo "FAIL: $*"; exit 1; }
# True when a CUDA GPU is usable here.
have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; }
gpu_count() { nvidia-smi -L 2>/dev/null | grep -c GPU; }
