#!/usr/bin/env bash
# CAR's hand-written shell parser against brush-parser (the parser of a bash-compatible shell) on
# the preset and gate corpora and a fuzz set made from them: inputs read, simple commands found,
# median time per parse, in one run. See benches/shell_parsers.rs.
# Results: bench-results/shell_parsers.json.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo bench --features shell-parser-bench --bench shell_parsers
