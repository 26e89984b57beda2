#!/usr/bin/env python3
"""plot: PNG figures from mok-bench reports (CSV or JSON), all given reports taken as one set.

  time-vs-tokens-<model>.png          median time of each implementation's best passed candidate, p10-p90 bars
  speedup-vs-tokens-<model>.png       best baseline time / best implementation time (nccl; nccl-p2p in comm mode)
  heatmap-<impl>-<model>-<tokens>.png median time over two numeric parameters, best over the others

A -<mode>/-<routing>/-<inputs>/-<dtype>/-<pass> suffix is added where a model has several. Every number comes from the
reports. Standard library + matplotlib (Agg) only."""
import argparse
import csv
import json
import math
import os
import re
import sys

REQUIRED = ("problem", "model", "impl", "params", "tokens_per_rank", "time_med_us")
OK = ("passed", "not_verified")  # dispositions whose times count (failed candidates never do)
BASELINE = {"layer": "nccl", "comm": "nccl-p2p"}
DIMS = ("mode", "routing", "inputs", "dtype", "pass")  # what tells apart the series of one model


class BadInput(Exception):
    pass


def num(v):
    """CSV gives strings ('' for NaN), JSON numbers or null: both become float, NaN when absent."""
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def read_report(path):
    """Rows of one report as dicts of strings/numbers, with 'mode', 'gpu' and 'ranks' filled in."""
    try:
        with open(path, newline="") as f:
            if path.endswith(".json"):
                doc = json.load(f)
                rows, env = doc.get("rows") or [], doc.get("env") or {}
                file_mode = (doc.get("config") or {}).get("mode", "layer")
                # JSON rows carry no environment columns: they sit once in the header.
                for r in rows:
                    r.setdefault("gpu", env.get("gpu", "?"))
                    r.setdefault("ranks", env.get("nranks", "?"))
                fields = set(rows[0]) if rows else set()
            else:
                reader = csv.DictReader(f)
                rows, fields, file_mode = list(reader), set(reader.fieldnames or ()), "layer"
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}")
    except (ValueError, AttributeError, csv.Error) as e:  # JSON syntax, not an object, bad CSV
        raise BadInput(f"{path}: not a mok-bench report: {e}")
    if not rows:
        raise BadInput(f"{path}: no rows")
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        raise BadInput(f"{path}: missing required column(s): {', '.join(missing)}")
    # A CSV does not say its mode; comm mode has no expert compute, so its rows report flops = 0. Rows that did
    # not run (no flops) take the mode of their problem's other rows.
    problem = lambda r: tuple(str(r.get(c)) for c in ("problem", "model", "tokens_per_rank", "routing", "inputs", "dtype"))
    known = {problem(r): "comm" if num(r.get("flops")) == 0 else "layer"
             for r in rows if not math.isnan(num(r.get("flops")))}
    if not path.endswith(".json") and known and "layer" not in known.values():
        file_mode = "comm"
    for i, r in enumerate(rows):
        r["mode"] = known.get(problem(r), file_mode)
        if math.isnan(num(r["tokens_per_rank"])):
            raise BadInput(f"{path}: row {i + 1}: tokens_per_rank is not a number")
        r["tokens_per_rank"] = int(num(r["tokens_per_rank"]))
        r["params"] = r["params"] or ""
    return rows


def parse_params(s):
    """'a=1,b=grouped' -> {'a': '1', 'b': 'grouped'}, in the report's order."""
    return dict(kv.split("=", 1) for kv in s.split(",") if "=" in kv)


def series_key(r):
    # reports from before the inputs column ran on uniform inputs
    return (r["model"],) + tuple(str(r.get(d) or ("uniform" if d == "inputs" else "")) for d in DIMS)


def best_by(rows, key):
    """Lowest median time per key among candidates whose check passed (or was not run)."""
    best = {}
    for r in rows:
        t = num(r["time_med_us"])
        if r.get("disposition", "passed") in OK and not math.isnan(t):
            k = key(r)
            if k not in best or t < num(best[k]["time_med_us"]):
                best[k] = r
    return best


def slug(s):
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(s)).strip("-")


def naming(rows):
    """File-name suffix and title of each series: only the dimensions a model has several values of."""
    varying = {}
    for r in rows:
        for i, d in enumerate(DIMS):
            varying.setdefault((r["model"], d), set()).add(series_key(r)[i + 1])
    names = {}
    for r in rows:
        s = series_key(r)
        suffix = "".join("-" + slug(v) for d, v in zip(DIMS, s[1:]) if len(varying[(s[0], d)]) > 1)
        names[s] = (slug(s[0]) + suffix, f"{s[0]} ({s[1]} mode), {s[2]}, inputs {s[3]}, {s[4]} {s[5]}")
    return names


def env_label(rows):
    return "; ".join(sorted({f"{r.get('ranks', '?')} x {r.get('gpu', '?')}" for r in rows}))


def save(fig, outdir, name, written):
    path = os.path.join(outdir, name + ".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(path)
    written.append(path)


def plot_lines(rows, outdir, written):
    names = naming(rows)
    best = best_by(rows, lambda r: series_key(r) + (r["tokens_per_rank"], r["impl"]))
    for s in sorted(names):
        pts = {k: r for k, r in best.items() if k[:-2] == s}
        if not pts:
            print(f"plot: no plots for {names[s][0]}: no passed candidates", file=sys.stderr)
            continue
        impls = sorted({k[-1] for k in pts})
        stem, title = names[s]
        title += " - " + env_label(pts.values())
        # time: best candidate per (tokens, impl); bars from its p10 to its p90
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for impl in impls:
            xs = sorted(k[-2] for k in pts if k[-1] == impl)
            rs = [pts[s + (x, impl)] for x in xs]
            med = [num(r["time_med_us"]) / 1e3 for r in rs]
            lo = [m - num(r.get("time_p10_us")) / 1e3 for m, r in zip(med, rs)]
            hi = [num(r.get("time_p90_us")) / 1e3 - m for m, r in zip(med, rs)]
            err = None if any(math.isnan(v) for v in lo + hi) else [lo, hi]
            ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=impl)
        finish(ax, title, "median time (ms), bars p10-p90", sorted({k[-2] for k in pts}))
        save(fig, outdir, "time-vs-tokens-" + stem, written)
        # speedup over the best baseline candidate of the same problem
        base = BASELINE.get(s[1], "nccl")
        fig, ax = plt.subplots(figsize=(7, 4.5))
        drawn = False
        for impl in impls:
            xy = [(x, num(pts[s + (x, base)]["time_med_us"]) / num(r["time_med_us"]))
                  for (x, r) in sorted((k[-2], r) for k, r in pts.items() if k[-1] == impl)
                  if s + (x, base) in pts]
            if xy:
                ax.plot(*zip(*xy), marker="o", label=impl)
                drawn = True
        if not drawn:
            plt.close(fig)
            print(f"plot: no speedup plot for {stem}: no passed '{base}' baseline", file=sys.stderr)
            continue
        ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
        finish(ax, title, f"speedup over best {base} (x)", sorted({k[-2] for k in pts}))
        save(fig, outdir, "speedup-vs-tokens-" + stem, written)


def finish(ax, title, ylabel, ticks):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()


def heatmap_specs(rows):
    """Default choice: megakernel's comm_sms x chunk when it has them; otherwise, for each implementation
    whose numeric parameters take two or more values, the first two of those in params order (nccl-overlap:
    chunks x expert_groups); the other parameters are then minimized over."""
    values = {}  # impl -> param -> set of values
    for r in rows:
        if r.get("disposition", "passed") in OK:
            for p, v in parse_params(r["params"]).items():
                values.setdefault(r["impl"], {}).setdefault(p, set()).add(v)
    mk = values.get("megakernel", {})
    if len(mk.get("comm_sms", ())) > 1 and len(mk.get("chunk", ())) > 1:
        return [("megakernel", "comm_sms", "chunk")]
    specs = []
    for impl, ps in sorted(values.items()):
        numeric = [p for p, vs in ps.items() if len(vs) > 1 and not any(math.isnan(num(v)) for v in vs)]
        if len(numeric) >= 2:
            specs.append((impl, numeric[0], numeric[1]))
        else:
            print(f"plot: no heatmap for {impl}: fewer than two numeric parameters vary", file=sys.stderr)
    return specs


def plot_heatmaps(rows, specs, outdir, written):
    names = naming(rows)
    for impl, px, py in specs:
        xy = lambda r: tuple(num(parse_params(r["params"]).get(p)) for p in (px, py))
        cand = [r for r in rows if r["impl"] == impl and not any(math.isnan(v) for v in xy(r))]
        best = best_by(cand, lambda r: series_key(r) + (r["tokens_per_rank"], xy(r)))
        problems = sorted({k[:-1] for k in best})
        if not problems:
            print(f"plot: no heatmap for {impl}: no passed rows with numeric {px} and {py}", file=sys.stderr)
        for prob in problems:
            cells = {k[-1]: num(r["time_med_us"]) for k, r in best.items() if k[:-1] == prob}
            xs, ys = sorted({c[0] for c in cells}), sorted({c[1] for c in cells})
            stem, title = names[prob[:-1]]
            if len(cells) < 2:  # nothing to compare
                print(f"plot: no heatmap-{slug(impl)}-{stem}-{prob[-1]}: one ({px}, {py}) point only", file=sys.stderr)
                continue
            grid = [[cells.get((x, y), math.nan) for x in xs] for y in ys]
            fig, ax = plt.subplots(figsize=(max(6.5, 1.4 * len(xs) + 3), 0.8 * len(ys) + 2.4))
            im = ax.imshow(grid, cmap="viridis_r", origin="lower", aspect="auto")
            fin = [v for row in grid for v in row if not math.isnan(v)]
            for j, row in enumerate(grid):
                for i, v in enumerate(row):
                    if not math.isnan(v):  # the fastest cell in bold
                        ax.text(i, j, f"{v:.0f}" if v >= 100 else f"{v:.3g}", ha="center", va="center", fontsize=8,
                                fontweight="bold" if v == min(fin) else "normal",
                                color="white" if v > (min(fin) + max(fin)) / 2 else "black")
            ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
            ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
            ax.set_xlabel(px)
            ax.set_ylabel(py)
            fig.colorbar(im, ax=ax, label="median time (us), best over other params")
            rs = [r for k, r in best.items() if k[:-1] == prob]
            ax.set_title(f"{impl}: {title}, {prob[-1]} tokens/rank\n{env_label(rs)}", fontsize=9)
            fig.tight_layout()
            save(fig, outdir, f"heatmap-{slug(impl)}-{stem}-{prob[-1]}", written)


def main():
    ap = argparse.ArgumentParser(prog="plot", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Exit status: 0 plots written; 2 bad input (a message names the file).")
    ap.add_argument("reports", nargs="+", metavar="REPORT", help="mok-bench report, .csv or .json")
    ap.add_argument("-o", "--outdir", help="where PNGs go (default: the first report's directory)")
    ap.add_argument("--heatmap", action="append", default=[], metavar="IMPL:PARAM_X:PARAM_Y",
                    help="heatmap of IMPL over these two parameters instead of the default choice (repeatable)")
    args = ap.parse_args()
    specs = [tuple(h.split(":")) for h in args.heatmap]
    if any(len(h) != 3 or not all(h) for h in specs):
        ap.error("--heatmap wants IMPL:PARAM_X:PARAM_Y")
    rows = []
    try:
        for path in args.reports:
            rows += read_report(path)
    except BadInput as e:
        print(f"plot: {e}", file=sys.stderr)
        return 2
    outdir = args.outdir or os.path.dirname(args.reports[0]) or "."
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        print(f"plot: {outdir}: cannot create: {e.strerror}", file=sys.stderr)
        return 2
    global plt  # imported late, so that --help and input errors need no matplotlib
    try:
        import matplotlib
    except ImportError:
        print(f"plot: matplotlib is not installed for {sys.executable} (Debian: python3-matplotlib)", file=sys.stderr)
        return 1
    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt
    written = []
    plot_lines(rows, outdir, written)
    plot_heatmaps(rows, specs or heatmap_specs(rows), outdir, written)
    if not written:
        print("plot: nothing to plot (no passed candidates)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
