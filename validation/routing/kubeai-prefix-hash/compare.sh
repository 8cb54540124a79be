#!/usr/bin/env bash
# Published against simulated: total token throughput, mean TTFT and mean ITL of each load balancer at
# each of the four load points (published.csv), seeds 1-3, and the ratios the publication draws.
# Usage: compare.sh [path/to/fleetsim] [extra --set arguments, e.g. for the 100-conversation assumption]
set -euo pipefail
cd "$(dirname "$0")"
fleetsim="${1:-fleetsim}"
shift || true
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
tail -n +2 published.csv | while IFS=, read -r rate conc config _; do
  for seed in 1 2 3; do
    printf '%s %s %s %s ' "$rate" "$conc" "$config" "$seed" >> "$runs"
    "$fleetsim" run "$config.toml" --quiet --json --set "seed=$seed" \
      --set "workload.clients=$conc" --set "workload.options.request_rate=$rate" "$@" | python3 -c '
import json, sys
d = json.load(sys.stdin)
b = d["benchmark"]
# vllm-bench: total tokens (prompt and output, every benchmark request) over the benchmark duration.
tokens = d["prefix_cache"]["prompt_tokens"] + b["output_tokens_per_s"] * b["duration_s"]
print(b["duration_s"], tokens / b["duration_s"], b["ttft_ms"]["mean"], b["itl_mean_ms"], d["prefix_cache"]["hit_rate"])' >> "$runs"
  done
done
python3 - "$runs" <<'PY'
import csv, statistics as st, sys
sim = {}
for line in open(sys.argv[1]):
    rate, conc, config, seed, *v = line.split()
    sim.setdefault((rate, conc, config), []).append([float(x) for x in v])
pub = {(r["request_rate"], r["max_concurrency"], r["config"]): r for r in csv.DictReader(open("published.csv"))}
mean = lambda k, i: st.mean(x[i] for x in sim[k])
print("kubeai-prefix-hash: published / simulated (seeds 1-3)")
print(f"{'load':>10} {'config':12} {'tok/s pub':>10} {'sim':>8} {'TTFT ms pub':>12} {'sim':>9} {'ITL ms pub':>11} {'sim':>6} {'hit':>6}")
for k, r in pub.items():
    print(f"{k[0] + '/' + k[1]:>10} {k[2]:12} {float(r['total_tokens_per_s']):>10.0f} {mean(k, 1):>8.0f} "
          f"{float(r['mean_ttft_ms']):>12.0f} {mean(k, 2):>9.0f} {float(r['mean_itl_ms']):>11.1f} {mean(k, 3):>6.1f} {mean(k, 4):>6.3f}")
print(f"\n{'ratio of total tokens/s':34}{'published':>10}{'simulated':>11}{'s.d.':>7}{'error':>8}{'winner':>8}")
errors = []
for load in sorted({(k[0], k[1]) for k in pub}, key=lambda l: int(l[1])):
    for a, b in [("prefix_hash", "round_robin"), ("prefix_hash", "least_load"), ("least_load", "round_robin")]:
        ka, kb = load + (a,), load + (b,)
        p = float(pub[ka]["total_tokens_per_s"]) / float(pub[kb]["total_tokens_per_s"])
        per_seed = [x[1] / y[1] for x, y in zip(sim[ka], sim[kb])]
        s = st.mean(per_seed)
        errors.append(abs(s - p) / p)
        print(f"{load[0] + '/' + load[1] + ' ' + a + ' / ' + b:34}{p:>10.3f}{s:>11.3f}{st.stdev(per_seed):>7.3f}{(s - p) / p:>+8.0%}{'right' if (p > 1) == (s > 1) else 'WRONG':>8}")
print(f"median |error| {st.median(errors):.0%}")
print(f"\n{'mean TTFT, round robin / prefix hash':40}{'published':>10}{'simulated':>11}")
for load in sorted({(k[0], k[1]) for k in pub}, key=lambda l: int(l[1])):
    ka, kb = load + ("round_robin",), load + ("prefix_hash",)
    print(f"{load[0] + '/' + load[1]:40}{float(pub[ka]['mean_ttft_ms']) / float(pub[kb]['mean_ttft_ms']):>10.1f}{mean(ka, 2) / mean(kb, 2):>11.1f}")
PY
