#!/usr/bin/env bash
# Runs CAR's whole test suite: formatting, lints, and every test (unit, integration, doc).
# Installs what the tests need first (the Python MCP SDK for the interop test, the pinned Claude
# Code CLI into tools/ for the plugin hook test), so it works on a fresh machine; set
# CAR_TEST_SKIP_INSTALL=1 to skip the installs.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_MCP_VERSION="2.3.0"
CLAUDE_CODE_VERSION="2.1.332"

if [ "${CAR_TEST_SKIP_INSTALL:-}" != "1" ]; then
  if ! python3 -c "import mcp" 2>/dev/null; then
    echo "==> installing the Python MCP SDK (mcp==${PY_MCP_VERSION}) for the interop test"
    python3 -m pip install --quiet --disable-pip-version-check "mcp==${PY_MCP_VERSION}"
  fi
  claude_pkg=tools/node_modules/@anthropic-ai/claude-code/package.json
  installed=$(node -p "require('./$claude_pkg').version" 2>/dev/null || true)
  if [ "$installed" != "$CLAUDE_CODE_VERSION" ]; then
    echo "==> installing Claude Code ${CLAUDE_CODE_VERSION} into tools/ for the plugin hook test"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"
  fi
fi

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

echo "==> cargo test"
cargo test

