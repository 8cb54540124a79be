"""Writes notebooks/*.ipynb from the cells below; run `python notebooks/make_notebooks.py notebooks`."""
import sys
import nbformat as nbf

def notebook(cells):
    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbf.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else nbf.v4.new_code_cell(c.strip("\n")) for c in cells]
    return nb

common_load = '''
import json, os
from pathlib import Path

import matplotlib.pyplot as plt
import polars as pl
'''

policy = [
"""md:# Policy comparison

Reads the results folder of `fleetsim compare` (one sub-folder per variant, each with `requests.parquet`
and `summary.json`) and compares the routing policies on the same arrivals: the TTFT distribution, the
prefix-cache hit rate, what was recomputed and why, and how evenly each policy loads the workers.

Make the results first, from the repository root:

```sh
cargo run --release -- compare scenarios/chat-sessions.toml \\
    --policies round_robin,least_outstanding,session_affinity,prefix_aware --out results/policy_comparison
```

then run this notebook (or set `FLEETSIM_RESULTS` to another comparison's folder).
""",
common_load + '''
results = Path(os.environ.get("FLEETSIM_RESULTS", "../results/policy_comparison"))
variants = sorted(p.parent for p in results.glob("*/requests.parquet"))
assert variants, f"no */requests.parquet under {results}: run fleetsim compare first (see above)"
requests = pl.concat(
    [pl.read_parquet(v / "requests.parquet").with_columns(pl.lit(v.name).alias("variant")) for v in variants]
)
summaries = {v.name: json.loads((v / "summary.json").read_text()) for v in variants}
requests.select("variant", "outcome").group_by("variant", "outcome").len().sort("variant", "outcome")
''',
"""md:## Headline numbers

Computed from the per-request rows; the TTFT percentiles equal those of each variant's `summary.json`
(the same requests, the same nanoseconds), which the last column checks.""",
'''
done = requests.filter(pl.col("outcome") == "completed").with_columns(
    (pl.col("ttft_ns") / 1e6).alias("ttft_ms")
)
table = (
    done.group_by("variant")
    .agg(
        pl.len().alias("completed"),
        pl.col("ttft_ms").mean().alias("ttft_mean_ms"),
        pl.col("ttft_ms").quantile(0.5, "nearest").alias("ttft_p50_ms"),
        pl.col("ttft_ms").quantile(0.95, "nearest").alias("ttft_p95_ms"),
        pl.col("ttft_ms").quantile(0.99, "nearest").alias("ttft_p99_ms"),
        (pl.col("cached_tokens").sum() / pl.col("prompt_tokens").sum()).alias("hit_rate"),
        pl.col("recomputed_tokens").sum().alias("recomputed_tokens"),
    )
    .sort("variant")
)
table = table.with_columns(
    pl.col("variant").map_elements(lambda v: summaries[v]["ttft_ms"]["p95"], return_dtype=pl.Float64)
    .alias("summary_p95_ms")
)
table
''',
"""md:## TTFT distribution

One line per policy. The x axis is logarithmic: the tail is where policies differ.""",
'''
fig, ax = plt.subplots(figsize=(8, 4.5))
for name, group in done.group_by("variant", maintain_order=True):
    ttft = group["ttft_ms"].sort().to_numpy()
    ax.step(ttft, [(i + 1) / len(ttft) for i in range(len(ttft))], where="post", label=name[0])
ax.set_xscale("log")
ax.set_xlabel("time to first token (ms)")
ax.set_ylabel("fraction of requests")
ax.set_title("TTFT CDF by policy")
ax.grid(True, alpha=0.3)
ax.legend()
plt.show()
''',
"""md:## TTFT by conversation turn

Turn 0 is a cold prompt everywhere; later turns show whether a policy kept the conversation's history
cached where the turn ran.""",
'''
by_turn = (
    done.filter(pl.col("turn").is_not_null())
    .with_columns(pl.when(pl.col("turn") >= 5).then(5).otherwise(pl.col("turn")).alias("turn_bucket"))
    .group_by("variant", "turn_bucket")
    .agg(pl.col("ttft_ms").quantile(0.95, "nearest").alias("ttft_p95_ms"), pl.len().alias("requests"))
    .sort("variant", "turn_bucket")
)
fig, ax = plt.subplots(figsize=(8, 4))
for name, group in by_turn.group_by("variant", maintain_order=True):
    ax.plot(group["turn_bucket"], group["ttft_p95_ms"], marker="o", label=name[0])
ax.set_xlabel("turn (5 = 5 and later)")
ax.set_ylabel("p95 TTFT (ms)")
ax.grid(True, alpha=0.3)
ax.legend()
plt.show()
by_turn
''',
"""md:## What was recomputed, and why

Tokens prefilled again although their KV existed somewhere: evicted from this worker, held by another
worker (misrouted), lost to a failure, preempted, or migrated.""",
'''
causes = ["evicted", "misrouted", "failure", "preempted", "migrated"]
recompute = (
    requests.group_by("variant")
    .agg([pl.col(f"recompute_{c}_tokens").sum().alias(c) for c in causes])
    .sort("variant")
)
fig, ax = plt.subplots(figsize=(8, 4))
bottom = [0] * recompute.height
for c in causes:
    values = recompute[c].to_list()
    ax.bar(recompute["variant"].to_list(), values, bottom=bottom, label=c)
    bottom = [b + v for b, v in zip(bottom, values)]
ax.set_ylabel("recomputed tokens")
ax.legend()
plt.xticks(rotation=20)
plt.show()
recompute
''',
"""md:## Load share per worker

The fraction of each policy's requests that each worker served: affinity and cache-aware policies trade
balance for reuse.""",
'''
share = (
    requests.filter(pl.col("worker").is_not_null())
    .group_by("variant", "worker")
    .len()
    .with_columns((pl.col("len") / pl.col("len").sum().over("variant")).alias("share"))
    .sort("variant", "worker")
)
share.pivot(on="worker", index="variant", values="share")
''',
]

failure = [
"""md:# Failure recovery

Reads the results of a run with faults, e.g. the bundled sticky-sessions incident (the worker holding the
most conversations crashes ten minutes in):

```sh
cargo run --release -- run scenarios/failure-sticky-crash.toml --out results/failure_recovery
```

and shows what the fleet did around each fault: TTFT and hit rate over time, the requests that failed or
were retried, the recompute the failure caused, and how long the fleet took to recover. Set
`FLEETSIM_RESULTS` to read another run's folder.
""",
common_load + '''
results = Path(os.environ.get("FLEETSIM_RESULTS", "../results/failure_recovery"))
summary = json.loads((results / "summary.json").read_text())
series = pl.read_csv(results / "timeseries.csv")
requests = pl.read_parquet(results / "requests.parquet")
recovery = pl.DataFrame(summary["recovery"]) if summary.get("recovery") else pl.DataFrame()
recovery
''',
"""md:## TTFT and hit rate over time

Per window of `timeseries.csv`; dashed lines mark the faults.""",
'''
fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
minutes = series["window_start_s"] / 60
top.plot(minutes, series["ttft_p50_ms"], label="p50")
top.plot(minutes, series["ttft_p95_ms"], label="p95")
top.set_ylabel("TTFT (ms)")
top.set_yscale("log")
top.legend()
bottom.plot(minutes, series["hit_rate"], color="tab:green")
bottom.set_ylabel("prefix-cache hit rate")
bottom.set_xlabel("simulated time (min)")
for row in recovery.iter_rows(named=True) if recovery.height else []:
    for ax in (top, bottom):
        ax.axvline(row["at_s"] / 60, color="tab:red", linestyle="--", alpha=0.7)
    top.annotate(row["fault"], (row["at_s"] / 60, top.get_ylim()[1]), fontsize=8, va="top")
for ax in (top, bottom):
    ax.grid(True, alpha=0.3)
plt.show()
''',
"""md:## Requests around the faults

Outcomes by minute, and the tokens recomputed because KV was lost with a worker.""",
'''
per_minute = (
    requests.with_columns((pl.col("arrival_s") // 60).cast(pl.Int64).alias("minute"))
    .group_by("minute")
    .agg(
        (pl.col("outcome") == "failed").sum().alias("failed"),
        (pl.col("retries") > 0).sum().alias("retried"),
        pl.col("session_reset").sum().alias("sessions_reset"),
        pl.col("recompute_failure_tokens").sum().alias("failure_recompute_tokens"),
        pl.len().alias("arrived"),
    )
    .sort("minute")
)
fig, ax = plt.subplots(figsize=(9, 3.5))
ax.bar(per_minute["minute"], per_minute["failure_recompute_tokens"], color="tab:orange")
ax.set_xlabel("arrival minute")
ax.set_ylabel("tokens recomputed (failure)")
ax.grid(True, alpha=0.3)
plt.show()
per_minute.filter(
    (pl.col("failed") > 0) | (pl.col("retried") > 0) | (pl.col("sessions_reset") > 0)
    | (pl.col("failure_recompute_tokens") > 0)
)
''',
"""md:## Recovery

`time_to_recover_s` is measured by fleetsim (`[metrics]` in the scenario sets the window, the hold time and
the tolerance); the check below recomputes the p95 TTFT before and after each fault from the rows.""",
'''
done = requests.filter(pl.col("outcome") == "completed")
checks = []
for row in recovery.iter_rows(named=True) if recovery.height else []:
    at = row["at_s"]
    before = done.filter((pl.col("first_token_s") < at) & (pl.col("first_token_s") >= at - 300))
    after = done.filter((pl.col("first_token_s") >= at) & (pl.col("first_token_s") < at + 120))
    checks.append({
        "fault": row["fault"],
        "p95_ttft_ms_5min_before": before["ttft_ns"].quantile(0.95, "nearest") / 1e6,
        "p95_ttft_ms_2min_after": after["ttft_ns"].quantile(0.95, "nearest") / 1e6,
        "time_to_recover_s": row["time_to_recover_s"],
    })
pl.DataFrame(checks)
''',
]

out = sys.argv[1]
nbf.write(notebook(policy), f"{out}/policy_comparison.ipynb")
nbf.write(notebook(failure), f"{out}/failure_recovery.ipynb")
