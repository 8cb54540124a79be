#!/usr/bin/env bash
# Runs one experiment's scheduler files over seeds 1-3 and prints published against simulated output
# throughput and its ratios. The experiment's folder holds `published.csv` (config,output_tokens_per_s:
# one row per scheduler, each config a `CONFIG.toml` beside it) and `pairs.csv` (a,b: the ratios a / b
# the publication compares). Usage: throughput-ratios.sh DIR [path/to/fleetsim]
set -euo pipefail
dir="$1"
fleetsim="${2:-fleetsim}"
cd "$dir"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
configs=$(tail -n +2 published.csv | cut -d, -f1)
for seed in 1 2 3; do
  for config in $configs; do
    printf '%s %s ' "$config" "$seed" >> "$runs"
    "$fleetsim" run "$config.toml" --quiet --json --set "seed=$seed" | python3 -c '
import json, sys
d = json.load(sys.stdin)
# A staged run reports throughput as its client does (inference-perf: the run from first send to
# last response); any other, the simulator throughput.
tput = d["stages"]["output_tokens_per_s"] if "stages" in d else d["throughput"]["output_tokens_per_s"]
print(tput, d["prefix_cache"]["hit_rate"], d["ttft_ms"]["p90"] / 1000)' >> "$runs"
  done
done
python3 - "$runs" <<'PY'
import csv, os, statistics as st, sys
by = {}
for config, seed, tput, hit, ttft in (l.split() for l in open(sys.argv[1])):
    by.setdefault(config, {})[seed] = (float(tput), float(hit), float(ttft))
published = {r["config"]: float(r["output_tokens_per_s"]) for r in csv.DictReader(open("published.csv"))}
seeds = sorted(next(iter(by.values())))
print(f"{os.path.basename(os.getcwd())}: output tokens/s, published and simulated (seeds {', '.join(seeds)})")
for c in published:
    v = [by[c][s][0] for s in seeds]
    print(f"  {c:10} published {published[c]:8.1f}   simulated {st.mean(v):8.1f} ± {st.stdev(v):6.1f}"
          f"   hit rate {st.mean(by[c][s][1] for s in seeds):.3f}   TTFT p90 {st.mean(by[c][s][2] for s in seeds):7.1f} s")
print(f"{'ratio':24}{'published':>10}{'simulated':>11}{'error':>8}{'winner':>9}")
for row in csv.DictReader(open("pairs.csv")):
    a, b = row["a"], row["b"]
    pub = published[a] / published[b]
    sim = st.mean(by[a][s][0] / by[b][s][0] for s in seeds)
    same = (pub > 1) == (sim > 1)
    print(f"{a + ' / ' + b:24}{pub:>10.3f}{sim:>11.3f}{(sim - pub) / pub:>+8.0%}{'right' if same else 'WRONG':>9}")
PY
