#!/usr/bin/env bash
# Runs this experiment's two configurations over seeds 1-3 and prints the published ratios beside the
# simulated ones (README.md). Usage: compare.sh [path/to/fleetsim]   (default: fleetsim on PATH)
set -euo pipefail
cd "$(dirname "$0")"
fleetsim="${1:-fleetsim}"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for seed in 1 2 3; do
  for config in round_robin cache_aware; do
    printf '%s %s ' "$config" "$seed" >> "$runs"
    "$fleetsim" run "$config.toml" --quiet --json --set "seed=$seed" | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d["throughput"]
print(d["prefix_cache"]["hit_rate"], t["input_tokens_per_s"] + t["output_tokens_per_s"])' >> "$runs"
  done
done
python3 - "$runs" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for config, seed, hit, tput in rows:
    by.setdefault(config, {})[seed] = (float(hit), float(tput))
seeds = sorted(by["round_robin"])
def mean_ratio(i):
    return st.mean(by["cache_aware"][s][i] / by["round_robin"][s][i] for s in seeds)
def mean(config, i):
    return st.mean(by[config][s][i] for s in seeds)
print("SGLang v0.4 cache-aware router vs round robin (8 x A100, Llama-3.1-8B, generated-shared-prefix)")
print(f"{'':32}{'published':>12}{'simulated':>12}{'error':>9}")
for name, pub, sim in [
    ("hit rate, round robin", 0.20, mean("round_robin", 0)),
    ("hit rate, cache-aware", 0.75, mean("cache_aware", 0)),
    ("hit rate ratio", 3.75, mean_ratio(0)),
    ("throughput ratio (total tok/s)", 158596 / 82665, mean_ratio(1)),
]:
    print(f"{name:32}{pub:>12.3f}{sim:>12.3f}{(sim - pub) / pub:>+9.0%}")
print(f"simulated total tok/s: round robin {mean('round_robin', 1):,.0f}, cache-aware {mean('cache_aware', 1):,.0f}"
      " (published 82,665 and 158,596)")
PY
