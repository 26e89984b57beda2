#!/usr/bin/env python3
"""sass_spills: where a kernel's local-memory spills sit relative to its wgmma main loops, without a disassembler.

Usage: sass_spills.py KERNELS.cubin [--match SUBSTRING] [--window BEFORE AFTER]

Build the cubin as scripts/cubin_text_cmp.py says (nvcc -cubin -gencode arch=compute_90a,code=sm_90a ...). The build
machine has no cuobjdump or nvdisasm, so this reads the sm_90a machine code itself: 16-byte instructions whose low
12 bits are the opcode. Five opcodes are used, each identified here by experiment on CUDA 13.0's ptxas, not from
documentation:
  0x983 LDL (a load from local memory: a spill reload), 0x387 STL (a spill store): their counts times 4 bytes equal
        ptxas -v's "bytes spill loads / stores" on the megakernel's instances (single-word spills);
  0x9f0 HGMMA (bf16 wgmma), 0x9f3 QGMMA (e4m3): kernels with 3 and with 5 unrolled wgmma.mma_async of the kind
        differ by exactly two of them; 0xdf0 HGMMA with A from registers: mxfp8 mx_scheme 3's grouped GEMM instance
        holds 8 of it (its 8 unrolled register-A wgmmas) and no 0x9f0, the bf16 one none (the only other opcode it
        adds, 0x848, occurs 12 / 4 times in the scheme 1 / 2 instances: their 16-byte shared-memory loads).
Runs of HGMMA or QGMMA (gaps under 40 instructions) are the wgmma main loops' bodies; a k loop also holds its
barrier wait before them and the slot release after, so a spill within BEFORE instructions before a run's first
wgmma or AFTER after its last (default 64 / 32: the megakernel's bf16 k loop spans 61 before and 27 after) is
reported as "in or near a main loop", any other as outside. Exit status 1 if any kernel has one. A heuristic over
the instruction order, not a control-flow analysis: an "outside" spill runs per tile or per unit at most only if
the code between is not itself a loop.
"""
import re
import subprocess
import sys

LDL, STL, GMMA = 0x983, 0x387, (0x9F0, 0x9F3, 0xDF0)


def kernels(path):
    out = subprocess.run(['readelf', '-S', '-W', path], capture_output=True, text=True, check=True).stdout
    found = {}
    for name in sorted(set(re.findall(r'\.text\.\S+', out))):
        dump = subprocess.run(['readelf', '-x', name, path], capture_output=True, text=True).stdout
        body = bytes.fromhex(''.join(line[13:48].replace(' ', '') for line in dump.splitlines()[2:]))
        found[name[len('.text.'):]] = [int.from_bytes(body[k:k + 8], 'little') & 0xFFF
                                       for k in range(0, len(body), 16)]
    return found


def runs(positions, gap=40):
    out = []
    for i in positions:
        if out and i - out[-1][1] < gap:
            out[-1][1] = i
            out[-1][2] += 1
        else:
            out.append([i, i, 1])
    return out


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    match, before, after = '', 64, 32
    if '--match' in args:
        match = args[args.index('--match') + 1]
    if '--window' in args:
        k = args.index('--window')
        before, after = int(args[k + 1]), int(args[k + 2])
    bad = 0
    for name, ops in kernels(args[0]).items():
        if match not in name:
            continue
        loops = runs([i for i, o in enumerate(ops) if o in GMMA])
        near = []
        for i, o in enumerate(ops):
            if o in (LDL, STL) and any(a - before <= i <= b + after for a, b, _ in loops):
                near.append(f"{'LDL' if o == LDL else 'STL'}@{i}")
        n_ld, n_st = ops.count(LDL), ops.count(STL)
        print(f"{name}: {len(ops)} instructions, {len(loops)} wgmma runs, LDL {n_ld}, STL {n_st}; "
              f"in or near a main loop: {', '.join(near) if near else 'none'}")
        bad += bool(near)
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
