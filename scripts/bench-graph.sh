#!/usr/bin/env bash
# Benchmarks `car graph scan` against `rg --files` over the same large source tree (the goal:
# a scan within 3x the time ripgrep takes to list the files). Both walk with ripgrep's rules:
# hidden files skipped, .gitignore/.ignore honoured without a git repository, no global
# gitignore. A cold scan starts from a fresh CAR_HOME (every file read, parsed and written); a
# warm rescan finds nothing changed (every file stat'ed, none read). The page cache is warm for
# all of them. Medians of RUNS runs. `rg -c` over the same files is printed too: a cold scan reads
# every file, which `rg --files` does not.
#
# Usage: scripts/bench-graph.sh [TREE ...]   (default: ~/.cargo/registry/src)
# RUNS=5 by default. Results: bench-results/graph.json (one object per tree).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
runs=${RUNS:-5}
if [[ $# -eq 0 ]]; then
    set -- "$HOME/.cargo/registry/src"
fi
if ! command -v rg >/dev/null; then
    echo "rg (ripgrep) is needed: apt-get install ripgrep, or cargo install ripgrep" >&2
    exit 2
fi

cargo build --release --bin car
car=${CARGO_TARGET_DIR:-$root/target}/release/car
results=$root/bench-results
mkdir -p "$results"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Milliseconds one command takes, its output discarded.
ms() {
    local start end
    start=$(date +%s%N)
    "$@" >/dev/null
    end=$(date +%s%N)
    echo $(((end - start) / 1000000))
}

median() {
    sort -n | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2))}'
}

rg_files() { rg --files --no-require-git --no-ignore-global "$1"; }
# A second reference for the cold scan, which reads every file: ripgrep reading them all too.
rg_read() { rg --no-require-git --no-ignore-global -c -e import -e use -e mod -e include "$1" || true; }
scan() { CAR_HOME=$1 "$car" --json --project "$2" graph scan; }

echo "[" >"$results/graph.json.tmp"
first=1
for tree in "$@"; do
    tree=$(cd "$tree" && pwd -P)
    rg_files "$tree" >/dev/null # warm the page cache
    files=$(rg_files "$tree" | wc -l)

    rg_ms=$(for _ in $(seq "$runs"); do ms rg_files "$tree"; done | median)
    read_ms=$(for _ in $(seq "$runs"); do ms rg_read "$tree"; done | median)
    cold_ms=$(for i in $(seq "$runs"); do ms scan "$work/cold-$i" "$tree"; rm -rf "$work/cold-$i"; done | median)
    scan "$work/warm" "$tree" >"$work/report.json"
    warm_ms=$(for _ in $(seq "$runs"); do ms scan "$work/warm" "$tree"; done | median)
    rm -rf "$work/warm"

    seen=$(jq .data.files_seen "$work/report.json")
    edges=$(jq .data.edges "$work/report.json")
    languages=$(jq -c .data.by_language "$work/report.json")
    cold_ratio=$(awk -v a="$cold_ms" -v b="$rg_ms" 'BEGIN {printf "%.2f", a / (b > 0 ? b : 1)}')
    warm_ratio=$(awk -v a="$warm_ms" -v b="$rg_ms" 'BEGIN {printf "%.2f", a / (b > 0 ? b : 1)}')

    echo "$tree: $files files by rg --files, $seen scanned, $edges edges; by language $languages"
    echo "  rg --files          ${rg_ms} ms"
    echo "  rg -c (reads all)   ${read_ms} ms"
    echo "  car graph scan cold ${cold_ms} ms  (${cold_ratio}x rg)"
    echo "  car graph scan warm ${warm_ms} ms  (${warm_ratio}x rg)"

    [[ $first -eq 1 ]] || echo "," >>"$results/graph.json.tmp"
    first=0
    jq -n --arg tree "$tree" --argjson files "$files" --argjson seen "$seen" --argjson edges "$edges" \
        --argjson by_language "$languages" --argjson runs "$runs" --argjson rg_ms "$rg_ms" --argjson read_ms "$read_ms" \
        --argjson cold_ms "$cold_ms" --argjson warm_ms "$warm_ms" \
        --argjson cold_ratio "$cold_ratio" --argjson warm_ratio "$warm_ratio" \
        '{tree: $tree, rg_files: $files, files_seen: $seen, edges: $edges, by_language: $by_language,
          runs: $runs, rg_files_ms: $rg_ms, rg_read_all_ms: $read_ms, scan_cold_ms: $cold_ms, scan_warm_ms: $warm_ms,
          cold_ratio: $cold_ratio, warm_ratio: $warm_ratio}' >>"$results/graph.json.tmp"
done
echo "]" >>"$results/graph.json.tmp"
mv "$results/graph.json.tmp" "$results/graph.json"
echo "results: $results/graph.json"
