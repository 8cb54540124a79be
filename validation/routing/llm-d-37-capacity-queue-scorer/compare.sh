#!/usr/bin/env bash
# Published against simulated output throughput and its ratios, seeds 1-3 (README.md).
# Usage: compare.sh [path/to/fleetsim]   (default: fleetsim on PATH)
exec "$(dirname "$0")/../throughput-ratios.sh" "$(dirname "$0")" "$@"
