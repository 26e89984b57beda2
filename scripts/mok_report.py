#!/usr/bin/env python3
"""mok_report: the one reader of mok-bench reports for every script here (plot, summarize*.py, weak_scaling.py,
tune_check.py, device/show.py), so that no script parses a report format itself.

Reads `.csv`, `.json`, and either gzipped (`.csv.gz`, `.json.gz`), of schema v1 (every report committed under
results/) and v2, and hands back the rows under the v2 names, every value a string as in the CSV ('' where the
report has none), so that a script tests and converts values one way whatever the file was:

  v1 `speedup_vs_nccl` -> `speedup`, with `speedup_baseline` the baseline v1 measured against (nccl in layer mode,
     cublas-gemm in gemm mode, nccl-p2p in comm mode; '' where the row has no speedup);
  v1 `power_capped`    -> `power_capped_share`;
  v2 columns a v1 report lacks (exposed_comm_us, capacity_factor, warmup, warmup_ms, seed, run_start) read '';
  `mode`: v2's column; in v1, the JSON config's mode, else told from the rows (below);
  JSON rows get the environment columns (gpu, ranks, sm_count, ...) that JSON keeps once in its `env`.

A v2 to v6 CSV is told by its `speedup` column (the CSV has no version line; v3 adds `wgrad`, v4 `h_check`
and `h_max_rel_err`, v5 `roofline_grad_bytes`, v6 `y_bf16_ref_err`), a JSON by its `schema_version`.

  scripts/mok_report.py --kind FILE...   prints "KIND<TAB>FILE" per file: report, summary, config, tunedb,
                                         tune-check, clocks, ncu-source, ncu-metrics or unknown (what
                                         tests/test_scripts_reports.sh walks)
"""
import csv
import gzip
import io
import json
import math
import sys

SCHEMAS = (1, 2, 3, 4, 5, 6)
REQUIRED = ("problem", "model", "impl", "params", "tokens_per_rank", "time_med_us")
OK = ("passed", "not_verified")  # dispositions whose times count (failed candidates never do)
BASELINE_V1 = {"layer": "nccl", "gemm": "cublas-gemm", "comm": "nccl-p2p"}  # what v1's speedup_vs_nccl was over
GEMM_IMPLS = ("cublas-gemm", "mok-gemm")  # implementations that exist only in gemm mode
RENAMED_V1 = {"speedup_vs_nccl": "speedup", "power_capped": "power_capped_share"}
NEW_V2 = ("speedup_baseline", "exposed_comm_us", "mode", "capacity_factor", "warmup", "warmup_ms", "seed",
          "run_start")
ENV_COLUMNS = {"gpu": "gpu", "sm_count": "sm_count", "ranks": "nranks", "lsa_size": "lsa_size",
               "cuda_runtime": "cuda_runtime", "cuda_driver": "cuda_driver", "nccl": "nccl", "mpi": "mpi",
               "mok_version": "mok_version", "commit": "commit"}  # CSV column -> JSON env key


class BadReport(Exception):
    """A file that cannot be read as a mok-bench report; the message starts with the path."""


def num(row, key):
    """The value as a float, NaN where absent or not a number."""
    v = row.get(key) if row else None
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def ratio(a, b):
    """a / b, NaN where b is 0 or either is NaN (a row whose divisor was not measured)."""
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def counts(row):
    """Whether the row's time counts (its check passed or was not run)."""
    return row.get("disposition", "passed") in OK and not math.isnan(num(row, "time_med_us"))


def open_text(path):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def _text(v):
    """JSON value -> the CSV's spelling: '' for null, integers without a decimal point."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def _load(path):
    """(format, parsed): ('json', object) or ('csv', list of header + rows); raises OSError or ValueError."""
    with open_text(path) as f:
        text = f.read()
    stem = path[:-3] if path.endswith(".gz") else path
    if stem.endswith(".json"):
        return "json", json.loads(text)
    if stem.endswith(".csv"):
        return "csv", list(csv.reader(io.StringIO(text)))
    raise ValueError("not a .csv, .json, .csv.gz or .json.gz file")


def kind(path):
    """What a .csv/.json(.gz) file is: 'report', 'summary', 'config', 'tunedb', 'tune-check', 'clocks', 'ncu-source',
    'ncu-metrics' or 'unknown' (also for a file that cannot be parsed)."""
    try:
        fmt, doc = _load(path)
    except (OSError, ValueError, EOFError, csv.Error):
        return "unknown"
    if fmt == "json":
        if not isinstance(doc, dict):
            return "unknown"
        if doc.get("tool") == "mok-bench" and "rows" in doc:
            return "report"
        if "entries" in doc:
            return "tunedb"
        if "problems" in doc and "impl" in doc:
            return "tune-check"
        if "impls" in doc:
            return "config"
        return "unknown"
    # ncu's --csv log files open with ==PROF== / ==WARNING== lines before the header
    rows = [r for r in doc if not (r and r[0].startswith("=="))]
    head = rows[0] if rows else []
    if "Kernel Name" in head and "Metric Name" in head:  # ncu --metrics ... --csv (node.sh's step tracecfg)
        return "ncu-metrics"
    if "ms_per_step" in head and "disposition" not in head:  # NAME.summary.csv: the best candidate per problem
        return "summary"
    if all(c in head for c in REQUIRED):
        return "report"
    if head and head[0].strip() == "timestamp":  # nvidia-smi --query-gpu ... --format=csv (device step CLOCKS=1)
        return "clocks"
    if "Kernel Name" in head or any("Warp Stall Sampling" in c for c in head):
        return "ncu-source"
    return "unknown"


def _infer_modes(rows):
    """v1 CSV rows do not say their mode: gemm mode is told by its implementations, comm mode by flops = 0 (no
    expert compute). Rows that did not run (no flops) take the mode of their problem's other rows."""
    problem = lambda r: tuple(r.get(c, "") for c in ("problem", "model", "tokens_per_rank", "routing", "inputs",
                                                      "dtype"))
    known = {}
    for r in rows:
        if r.get("impl") in GEMM_IMPLS:
            known[problem(r)] = "gemm"
        elif problem(r) not in known and not math.isnan(num(r, "flops")):
            known[problem(r)] = "comm" if num(r, "flops") == 0 else "layer"
    fallback = "comm" if known and set(known.values()) == {"comm"} else "layer"
    for r in rows:
        r["mode"] = known.get(problem(r), fallback)


def _from_json(path, doc):
    if not isinstance(doc, dict) or doc.get("tool") != "mok-bench" or not isinstance(doc.get("rows"), list):
        raise BadReport(f"{path}: not a mok-bench report (a JSON object with tool \"mok-bench\" and rows)")
    version = doc.get("schema_version")
    if version not in SCHEMAS:
        raise BadReport(f"{path}: schema_version {version!r}; this reader knows {', '.join(map(str, SCHEMAS))}")
    env = doc.get("env") if isinstance(doc.get("env"), dict) else {}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    rows = []
    for i, r in enumerate(doc["rows"]):
        if not isinstance(r, dict):
            raise BadReport(f"{path}: row {i + 1} is not an object")
        row = {k: _text(v) for k, v in r.items()}
        for col, key in ENV_COLUMNS.items():  # JSON keeps the environment once, in env
            if col not in row and key in env:
                row[col] = _text(env[key])
        rows.append(row)
    return version, rows, config.get("mode"), set().union(*rows) if rows else set()


def _from_csv(path, table):
    if not table or not table[0]:
        raise BadReport(f"{path}: empty file")
    head = table[0]
    rows = [dict(zip(head, r + [""] * (len(head) - len(r)))) for r in table[1:] if r]
    return (2 if "speedup" in head else 1), rows, None, set(head)


def read(path, required=REQUIRED):
    """The rows of one report under the v2 names (module doc), each with '_file' = path. Raises BadReport."""
    try:
        fmt, doc = _load(path)
    except OSError as e:
        raise BadReport(f"{path}: cannot read: {e.strerror or e}")
    except (ValueError, EOFError, csv.Error) as e:  # JSON syntax, bad gzip, bad CSV, unknown extension
        raise BadReport(f"{path}: not a mok-bench report: {e}")
    version, rows, mode, fields = (_from_json if fmt == "json" else _from_csv)(path, doc)
    if not rows:
        raise BadReport(f"{path}: no rows")
    if version == 1:
        fields = {RENAMED_V1.get(c, c) for c in fields}
    missing = [c for c in required if c not in fields]
    if missing:
        raise BadReport(f"{path}: missing required column(s): {', '.join(missing)}")
    if version == 1:
        for r in rows:
            for old, new in RENAMED_V1.items():
                if old in r:
                    r[new] = r.pop(old)
        if mode:
            for r in rows:
                r["mode"] = mode
        else:
            _infer_modes(rows)
        for r in rows:
            r["speedup_baseline"] = BASELINE_V1.get(r["mode"], "") if r.get("speedup", "") != "" else ""
    for r in rows:
        for c in NEW_V2:
            r.setdefault(c, "")
        if not r["mode"]:  # a v2 row without its mode: the JSON config's, else layer (the default mode)
            r["mode"] = mode or "layer"
        r["_file"] = path
    return rows


def read_all(paths, prog, required=REQUIRED):
    """Rows of every report, in order; a bad one ends the program with exit 2 and a message naming the file."""
    rows = []
    for path in paths:
        try:
            rows += read(path, required)
        except BadReport as e:
            print(f"{prog}: {e}", file=sys.stderr)
            sys.exit(2)
    return rows


def print_table(head, lines, markdown=False):
    """The scripts' printed tables: a Markdown table (results READMEs), or columns padded to their widest cell."""
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for ln in lines:
            print("| " + " | ".join(ln) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(head, *lines)]
        for ln in [head] + lines:
            print("  ".join(x.ljust(wd) for x, wd in zip(ln, widths)).rstrip())


def main(argv):
    if len(argv) < 3 or argv[1] != "--kind":
        print(__doc__.rstrip(), file=sys.stderr)
        return 2
    for path in argv[2:]:
        print(f"{kind(path)}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
