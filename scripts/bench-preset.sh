#!/usr/bin/env bash
# Benchmarks the recommended policy preset (`car policy-check-hook`) against cc-safety-net, a
# Claude Code safety hook from npm, and dcg (destructive_command_guard, a Rust hook from the
# Rust registry), on tests/it/data/shell_corpus.tsv and tests/it/data/gate_corpus.tsv (the
# latter from a nested project's subdirectory), with /bin/true as the floor: every hook gets every
# command as a PreToolUse payload on stdin, one process per call, in the same run. Prints a
# markdown table of decisions and a summary (blocked destructive x/N, blocked harmless y/M,
# median ms per call). See benches/preset.rs.
#
# Usage: scripts/bench-preset.sh [--runs N]   (or BENCH_RUNS=N; PEER_CMD=none skips the peer)
# Results: bench-results/preset.md and bench-results/preset.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

peer_version=${PEER_VERSION:-2.4.5}
peer_dir=$root/tools/node_modules/cc-safety-net

installed=$(node -p "require('$peer_dir/package.json').version" 2>/dev/null || true)
if [[ $installed != "$peer_version" ]]; then
    echo "installing cc-safety-net@$peer_version into tools/" >&2
    npm install --prefix "$root/tools" --save-exact --no-audit --no-fund \
        "cc-safety-net@$peer_version" >&2
fi

# dcg (destructive_command_guard) from the Rust registry: its dependencies need a nightly
# toolchain (Rust >= 1.96) and its lock file pins a yanked crate, so no --locked.
dcg_version=${DCG_VERSION:-0.16.0}
if [[ ${DCG_BIN:-} != none && ! -x $root/tools/dcg/bin/dcg ]]; then
    echo "installing dcg $dcg_version into tools/dcg" >&2
    cargo +nightly install "destructive_command_guard@$dcg_version" --root "$root/tools/dcg" >&2
fi

cargo build --release --bin car --bin car-gate
# The gate the Linux archives ship: static (musl), so no dynamic loader runs before it.
if [[ $(uname -s) == Linux && -z ${CAR_GATE_BIN:-} ]]; then
    gate_target=$(uname -m)-unknown-linux-musl
    rustup target list --installed | grep -qx "$gate_target" || rustup target add "$gate_target" >&2
    cargo build --release --target "$gate_target" --bin car-gate
    export CAR_GATE_BIN=${CARGO_TARGET_DIR:-$root/target}/$gate_target/release/car-gate
fi

export CAR_BIN_DIR=${CAR_BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/release}
# `hook --coding-cli` is cc-safety-net's Claude Code PreToolUse mode (what its installer registers).
export PEER_CMD=${PEER_CMD:-node $peer_dir/dist/bin/cc-safety-net.js hook --coding-cli}
export PEER_VERSION=$peer_version

cargo bench --bench preset -- "$@"
