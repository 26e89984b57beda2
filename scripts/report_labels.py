"""report_labels: how the report scripts name a problem's routing (summarize.py, summarize_megakernel.py,
weak_scaling.py share it, so rows of a multi-inputs config stay apart the same way everywhere)."""


def routing_label(row):
    """The routing, and the inputs distribution when it is not the default (reports before the inputs column ran on
    uniform inputs)."""
    inputs = row.get("inputs") or "uniform"
    return row["routing"] if inputs == "uniform" else f"{row['routing']}, inputs {inputs}"
