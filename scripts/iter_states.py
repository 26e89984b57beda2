#!/usr/bin/env python3
"""iter_states.py ITERS.txt [...]: whether each candidate's timed iterations (a MOK_ITER_LOG file) ran in one state
or in two, e.g. at full clocks first and then held down by the GPU's power limit. A median over a run that changes
state mid-way lands in either state, so two candidates compared that way compare clock states, not code.

Per candidate: iterations, median, min and max (ms); then, where the sorted times jump by more than --gap (default
4%) with at least --least iterations (default 3, or 3% of them) on each side (so a lone spike is no state), the
largest such jump splits two states: their medians, how many iterations each holds and where the slow state
starts. Prints a markdown table; exits 0."""
import argparse
import statistics


def states(times, gap, least):
    """(fast median, fast count, slow median, slow count, index of the first slow iteration), or None."""
    order = sorted(times)
    n = len(order)
    need = max(least, int(0.03 * n))
    best, cut = gap, None
    for i in range(need, n - need + 1):
        jump = (order[i] - order[i - 1]) / order[i - 1]
        if jump > best:
            best, cut = jump, i
    if cut is None:
        return None
    threshold = order[cut]
    fast = [t for t in times if t < threshold]
    slow = [t for t in times if t >= threshold]
    first_slow = next(i for i, t in enumerate(times) if t >= threshold)
    return statistics.median(fast), len(fast), statistics.median(slow), len(slow), first_slow


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--gap", type=float, default=0.04, help="relative jump between sorted times that splits states")
    ap.add_argument("--least", type=int, default=3, help="least iterations on each side of a split")
    args = ap.parse_args()
    print("| candidate | iters | median ms | min | max | states |")
    print("|---|---|---|---|---|---|")
    for path in args.logs:
        for line in open(path):
            if ":" not in line:
                continue
            head, values = line.rsplit(":", 1)
            times = [float(v) for v in values.split()]
            if not times:
                continue
            found = states(times, args.gap, args.least)
            if found:
                fm, fn, sm, sn, first = found
                verdict = (f"two: {fm:.3f} ms x {fn} and {sm:.3f} ms x {sn} ({sm / fm - 1:+.0%}); "
                           f"the slow state from iteration {first}")
            else:
                verdict = "one"
            print(f"| {head.strip()} | {len(times)} | {statistics.median(times):.3f} | {min(times):.3f} | "
                  f"{max(times):.3f} | {verdict} |")


if __name__ == "__main__":
    main()
