#!/bin/sh
# test_scripts_run: scripts/run.sh's launch logic, without a GPU: stand-ins for nvidia-smi, mpirun and ninja on a
# PATH of only what run.sh uses. One rank per GPU listed (1 and 2; MIG lines not counted), CUDA_VISIBLE_DEVICES's
# entries when set, NP= over both; every launch passes NCCL_NVLS_ENABLE=0; no GPU, no nvidia-smi or no mpirun stop
# with a message and exit 1 before any build; a bad NP and no config exit 2; a directory of prebuilt binaries runs as built
# (a GPU node), and with no build tools and no binary run.sh stops with exit 1.
set -u
SRC=$1; SCRATCH=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH/base" "$SCRATCH/fake" "$SCRATCH/build"
for tool in sh grep tr dirname id cat; do
  p=$(command -v "$tool") || fail "no $tool"
  ln -s "$p" "$SCRATCH/base/$tool"
done
# nvidia-smi -L as the driver prints it: FAKE_GPUS lines "GPU n: ...", each with a MIG line under it
cat > "$SCRATCH/fake/nvidia-smi" <<'EOF'
#!/bin/sh
i=0
while [ "$i" -lt "${FAKE_GPUS:-0}" ]; do
  echo "GPU $i: NVIDIA H200 (UUID: GPU-0000000$i)"
  echo "  MIG 1g.18gb     Device  0: (UUID: MIG-0000000$i)"
  i=$((i + 1))
done
EOF
printf '#!/bin/sh\necho "$*" > "$FAKE_LOG"\n' > "$SCRATCH/fake/mpirun"
printf '#!/bin/sh\necho built >> "$FAKE_LOG.build"\n' > "$SCRATCH/fake/ninja"
chmod +x "$SCRATCH/fake"/*
: > "$SCRATCH/build/build.ninja"
export FAKE_LOG="$SCRATCH/mpirun.args" MOK_BUILD="$SCRATCH/build"
unset CUDA_VISIBLE_DEVICES NP NGPUS
RUN="$SRC/scripts/run.sh"

# launch EXPECTED_NP [VAR=VALUE...]: run.sh configs/quick.json -n 5 under the stand-ins; it must call mpirun with
# -np EXPECTED_NP, NCCL_NVLS_ENABLE=0, the build's mok-bench and the arguments as given
launch() {
  want=$1; shift
  rm -f "$FAKE_LOG"
  env PATH="$SCRATCH/fake:$SCRATCH/base" "$@" sh "$RUN" configs/quick.json -n 5 > "$SCRATCH/out" 2>&1 ||
    { cat "$SCRATCH/out"; fail "$*: exit $?"; }
  args=$(cat "$FAKE_LOG")
  echo "$args" | grep -q -- "-np $want " || fail "$*: not -np $want: $args"
  echo "$args" | grep -q -- "-x NCCL_NVLS_ENABLE=0 " || fail "$*: no NCCL_NVLS_ENABLE=0: $args"
  echo "$args" | grep -q -- "$SCRATCH/build/mok-bench configs/quick.json -n 5\$" || fail "$*: binary or arguments: $args"
}
launch 1 FAKE_GPUS=1
launch 2 FAKE_GPUS=2
launch 1 FAKE_GPUS=2 CUDA_VISIBLE_DEVICES=1
launch 2 FAKE_GPUS=8 CUDA_VISIBLE_DEVICES=0,3
launch 3 FAKE_GPUS=1 NP=3
launch 4 FAKE_GPUS=1 NGPUS=4
[ "$(id -u)" = 0 ] && { grep -q -- "--allow-run-as-root" "$FAKE_LOG" || fail "root without --allow-run-as-root"; }

# refuse KIND RC NEEDLE [VAR=VALUE...]: exit RC, a message with NEEDLE, mpirun and the build not reached
refuse() {
  what=$1; rc_want=$2; needle=$3; shift 3
  rm -f "$FAKE_LOG" "$FAKE_LOG.build"
  env "$@" sh "$RUN" configs/quick.json > "$SCRATCH/out" 2>&1; rc=$?
  [ $rc -eq "$rc_want" ] || { cat "$SCRATCH/out"; fail "$what: exit $rc, not $rc_want"; }
  grep -q "$needle" "$SCRATCH/out" || { cat "$SCRATCH/out"; fail "$what: message lacks '$needle'"; }
  [ ! -e "$FAKE_LOG" ] && [ ! -e "$FAKE_LOG.build" ] || fail "$what: went on to build or launch"
}
refuse "no GPU listed" 1 "no GPU: nvidia-smi -L lists none" PATH="$SCRATCH/fake:$SCRATCH/base" FAKE_GPUS=0
refuse "CUDA_VISIBLE_DEVICES empty" 1 "CUDA_VISIBLE_DEVICES" PATH="$SCRATCH/fake:$SCRATCH/base" FAKE_GPUS=2 \
  CUDA_VISIBLE_DEVICES=
refuse "no nvidia-smi" 1 "nvidia-smi not found" PATH="$SCRATCH/base"
mv "$SCRATCH/fake/mpirun" "$SCRATCH/fake/mpirun.off"
refuse "no mpirun" 1 "mpirun not found" PATH="$SCRATCH/fake:$SCRATCH/base" FAKE_GPUS=1
mv "$SCRATCH/fake/mpirun.off" "$SCRATCH/fake/mpirun"
refuse "NP=0" 2 "NP='0'" PATH="$SCRATCH/fake:$SCRATCH/base" FAKE_GPUS=1 NP=0
refuse "NP=two" 2 "NP='two'" PATH="$SCRATCH/fake:$SCRATCH/base" FAKE_GPUS=1 NP=two
# no build tools: a clear stop; a directory of prebuilt binaries (no build.ninja; a GPU node): run as built
mv "$SCRATCH/fake/ninja" "$SCRATCH/fake/ninja.off"
refuse "no ninja, no binary" 1 "no meson/ninja here and no" PATH="$SCRATCH/fake:$SCRATCH/base" FAKE_GPUS=1
mv "$SCRATCH/fake/ninja.off" "$SCRATCH/fake/ninja"
rm "$SCRATCH/build/build.ninja"
printf '#!/bin/sh\n' > "$SCRATCH/build/mok-bench"; chmod +x "$SCRATCH/build/mok-bench"
launch 1 FAKE_GPUS=1
grep -q "running its mok-bench as built" "$SCRATCH/out" || fail "prebuilt binaries: does not say it runs them as built"
[ ! -e "$FAKE_LOG.build" ] || fail "prebuilt binaries: built anyway"
env PATH="$SCRATCH/fake:$SCRATCH/base" sh "$RUN" > "$SCRATCH/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q usage "$SCRATCH/out" || fail "no config: exit $rc"
echo "test_scripts_run: all passed"
