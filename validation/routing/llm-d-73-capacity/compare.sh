#!/usr/bin/env bash
# Runs the four schedulers over seeds 1-3 and prints the published throughput ratios beside the
# simulated ones (README.md). Usage: compare.sh [path/to/fleetsim]   (default: fleetsim on PATH)
set -euo pipefail
cd "$(dirname "$0")"
fleetsim="${1:-fleetsim}"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for seed in 1 2 3; do
  for config in precise estimated random load; do
    printf '%s %s ' "$config" "$seed" >> "$runs"
    "$fleetsim" run "$config.toml" --quiet --json --set "seed=$seed" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["throughput"]["output_tokens_per_s"], d["prefix_cache"]["hit_rate"], d["ttft_ms"]["p90"] / 1000)' >> "$runs"
  done
done
python3 - "$runs" <<'PY'
import sys, statistics as st
by = {}
for config, seed, tput, hit, ttft in (l.split() for l in open(sys.argv[1])):
    by.setdefault(config, {})[seed] = (float(tput), float(hit), float(ttft))
seeds = sorted(by["precise"])
published = {"precise": 8730.0, "estimated": 6944.4, "random": 4428.7, "load": 4266.4}
print("llm-d 73% capacity: output tokens/s, summary across QPS (published) and simulated (3 seeds)")
for c in published:
    v = [by[c][s][0] for s in seeds]
    print(f"  {c:10} published {published[c]:8.1f}   simulated {st.mean(v):8.1f} ± {st.stdev(v):6.1f}"
          f"   hit rate {st.mean(by[c][s][1] for s in seeds):.3f}   TTFT p90 {st.mean(by[c][s][2] for s in seeds):7.1f} s")
print(f"{'ratio':24}{'published':>10}{'simulated':>11}{'error':>8}{'winner':>9}")
for a, b in [("precise", "estimated"), ("precise", "random"), ("estimated", "random"), ("load", "random")]:
    pub = published[a] / published[b]
    sim = st.mean(by[a][s][0] / by[b][s][0] for s in seeds)
    same = (pub > 1) == (sim > 1)
    print(f"{a + ' / ' + b:24}{pub:>10.3f}{sim:>11.3f}{(sim - pub) / pub:>+8.0%}{'right' if same else 'WRONG':>9}")
PY
