#!/usr/bin/env python3
"""cubin_text_cmp: whether a kernel refactor left the machine code alone, without a disassembler.

Usage: cubin_text_cmp.py OLD.cubin NEW.cubin [--map FROM=TO ...]

Build both with the same flags, e.g.
  nvcc -std=c++17 -O3 -cubin -gencode arch=compute_90a,code=sm_90a -I<tree>/kernels <tree>/kernels/<file>.cu -o x.cubin
from the old tree (git archive <rev> kernels | tar -x -C /tmp/old) and the new one. Each .text section of OLD
(one per kernel) is compared byte for byte with NEW's of the same kernel: "same", "DIFF" (with how many 16-byte
instructions differ), "MISSING" in NEW; NEW's extra kernels are listed as "NEW". Section names are matched after
dropping the anonymous namespace's hash (it follows the file's path) and applying each --map substitution to NEW's
names (a template parameter added with a default: --map 'ELb0EEEvNS_4Maps=EEEvNS_4Maps').

A kernel whose argument struct grew differs in the instructions that load the arguments after it: build OLD with
the new header to tell that apart from a code change (same lengths, few differing instructions is that sign).
"""
import re
import subprocess
import sys


def text_sections(path, maps):
    out = subprocess.run(['readelf', '-S', '-W', path], capture_output=True, text=True, check=True).stdout
    found = {}
    for name in re.findall(r'\.text\.\S+', out):
        dump = subprocess.run(['readelf', '-x', name, path], capture_output=True, text=True).stdout
        body = ''.join(line[13:48].replace(' ', '') for line in dump.splitlines()[2:])
        key = re.sub(r'_GLOBAL__N__[0-9a-f]+_\d+_\w+?_[0-9a-f]{8}\d*', 'ANON', name)
        for a, b in maps:
            key = key.replace(a, b)
        found[key] = body
    return found


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    maps = []
    for i, a in enumerate(args[2:]):
        if a == '--map' and i + 3 < len(args):
            maps.append(tuple(args[i + 3].split('=', 1)))
    old, new = text_sections(args[0], []), text_sections(args[1], maps)
    for key in sorted(old):
        if key not in new:
            print('MISSING', key)
        elif old[key] == new[key]:
            print('same   ', key)
        else:
            a, b = old[key], new[key]
            n = min(len(a), len(b)) // 32
            diff = sum(a[32 * i:32 * i + 32] != b[32 * i:32 * i + 32] for i in range(n))
            print('DIFF   ', key, '(instructions %d / %d, %d differ)' % (len(a) // 32, len(b) // 32, diff))
    for key in sorted(set(new) - set(old)):
        print('NEW    ', key)


if __name__ == '__main__':
    main()
