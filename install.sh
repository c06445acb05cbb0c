#!/bin/sh
# Installs CAR (car, car-gate, car-mcp, car-server, car-memgine-eval) from a GitHub release, verified:
#
#   curl -fsSL https://github.com/car-runtime/car/releases/latest/download/install.sh | sh
#
# It downloads car-<platform>.tar.gz and SHA256SUMS, checks the archive's SHA-256 against
# SHA256SUMS and installs nothing unless it matches. No root needed.
#
# Environment:
#   CAR_VERSION       the release to install: latest (default), 0.1.0 or v0.1.0
#   CAR_INSTALL       where to install (default ~/.car); the binaries go to $CAR_INSTALL/bin
#   CAR_NO_PATH=1     do not print the line that puts $CAR_INSTALL/bin on PATH
#   CAR_PLUGIN=1      also add CAR's Claude Code plugin (same as --plugin), when `claude` is on PATH
#   CAR_DOWNLOAD_URL  fetch the assets from this URL instead of the GitHub release (a mirror, a
#                     local test server): $CAR_DOWNLOAD_URL/car-<platform>.tar.gz and /SHA256SUMS
#   CAR_MARKETPLACE   the marketplace `claude plugin marketplace add` gets (default car-runtime/car)
#   CAR_OS, CAR_ARCH  use these instead of `uname -s` and `uname -m`
#
# Options: --plugin (as CAR_PLUGIN=1), --help.
set -eu

# The repository the releases and the plugin marketplace come from: the one place to change.
CAR_REPO="car-runtime/car"
# Release archives for Linux are built on Ubuntu 22.04; see DISTRIBUTION.md.
MIN_GLIBC="2.35"
BINS="car car-gate car-mcp car-server car-memgine-eval"

say() {
  printf '%s\n' "$*"
}

die() {
  printf 'install.sh: error: %s\n' "$*" >&2
  exit 1
}

unsupported() {
  die "unsupported platform: $1. CAR publishes archives for darwin-arm64, darwin-x64, \
linux-x64-gnu, linux-arm64-gnu (glibc >= $MIN_GLIBC) and win32-x64-msvc (download the .zip by \
hand: https://github.com/$CAR_REPO/releases). Elsewhere build it from source: \
cargo install --locked --git https://github.com/$CAR_REPO car"
}

# The release platform of this machine: darwin-arm64, darwin-x64, linux-x64-gnu, linux-arm64-gnu.
detect_platform() {
  os=${CAR_OS:-$(uname -s)}
  arch=${CAR_ARCH:-$(uname -m)}
  case "$arch" in
    arm64 | aarch64) cpu=arm64 ;;
    x86_64 | amd64) cpu=x64 ;;
    *) unsupported "$os (CPU $arch)" ;;
  esac
  case "$os" in
    Darwin)
      # An x64 shell under Rosetta on Apple Silicon still gets the native build.
      if [ "$cpu" = x64 ] && [ -z "${CAR_ARCH:-}" ] &&
        [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || true)" = 1 ]; then
        cpu=arm64
      fi
      platform="darwin-$cpu"
      ;;
    Linux)
      if ldd --version 2>&1 | grep -qi musl; then
        unsupported "Linux with musl libc (the archives need glibc >= $MIN_GLIBC)"
      fi
      glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p' || true)
      if [ -n "$glibc" ] && ! version_at_least "$glibc" "$MIN_GLIBC"; then
        unsupported "Linux with glibc $glibc (the archives need glibc >= $MIN_GLIBC)"
      fi
      platform="linux-$cpu-gnu"
      ;;
    MINGW* | MSYS* | CYGWIN* | Windows_NT)
      die "this installer is for macOS and Linux. On Windows download car-win32-x64-msvc.zip \
and SHA256SUMS from https://github.com/$CAR_REPO/releases, check the archive with \
\`Get-FileHash car-win32-x64-msvc.zip\`, and put car.exe, car-gate.exe, car-mcp.exe, car-server.exe and car-memgine-eval.exe on PATH"
      ;;
    *) unsupported "$os (CPU $arch)" ;;
  esac
}

# version_at_least HAVE NEED: true when the dotted version HAVE >= NEED (major.minor).
version_at_least() {
  have_major=${1%%.*} need_major=${2%%.*}
  have_minor=${1#*.} need_minor=${2#*.}
  have_minor=${have_minor%%.*} need_minor=${need_minor%%.*}
  [ "$have_major" -gt "$need_major" ] ||
    { [ "$have_major" -eq "$need_major" ] && [ "$have_minor" -ge "$need_minor" ]; }
}

# download URL FILE
download() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 3 -o "$2" "$1" || die "could not download $1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$2" "$1" || die "could not download $1"
  else
    die "neither curl nor wget is installed"
  fi
}

# sha256 FILE: prints the file's SHA-256 in hex.
sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d ' ' -f 1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d ' ' -f 1
  else
    die "neither sha256sum nor shasum is installed, so the download cannot be verified; nothing was installed"
  fi
}

# The line that puts DIR on PATH for the user's shell, and the file it belongs in.
print_path_line() {
  case "$PATH" in
    *":$1:"* | "$1:"* | *":$1" | "$1")
      say "$1 is already on your PATH."
      return
      ;;
  esac
  shell_name=$(basename "${SHELL:-sh}")
  say ""
  say "Add CAR to your PATH (then open a new terminal):"
  case "$shell_name" in
    fish) say "  fish_add_path \"$1\"" ;;
    zsh) say "  echo 'export PATH=\"$1:\$PATH\"' >> ~/.zshrc" ;;
    bash) say "  echo 'export PATH=\"$1:\$PATH\"' >> ~/.bashrc" ;;
    *) say "  echo 'export PATH=\"$1:\$PATH\"' >> ~/.profile" ;;
  esac
}

# Adds the marketplace and installs the plugin with the `claude` on PATH.
add_plugin() {
  marketplace=${CAR_MARKETPLACE:-$CAR_REPO}
  if ! command -v claude >/dev/null 2>&1; then
    say ""
    say "Claude Code (claude) is not on PATH; once it is, add the plugin with:"
    say "  claude plugin marketplace add $marketplace && claude plugin install car@car"
    return
  fi
  say ""
  say "Adding the CAR plugin to Claude Code"
  claude plugin marketplace add "$marketplace" ||
    die "claude plugin marketplace add $marketplace failed (CAR itself is installed)"
  claude plugin install car@car ||
    die "claude plugin install car@car failed (CAR itself is installed)"
}

main() {
  plugin=${CAR_PLUGIN:-0}
  for arg in "$@"; do
    case "$arg" in
      --plugin) plugin=1 ;;
      -h | --help)
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
        return
        ;;
      *) die "unknown argument: $arg (see --help)" ;;
    esac
  done

  detect_platform
  version=${CAR_VERSION:-latest}
  if [ -n "${CAR_DOWNLOAD_URL:-}" ]; then
    base=${CAR_DOWNLOAD_URL%/}
  elif [ "$version" = latest ]; then
    base="https://github.com/$CAR_REPO/releases/latest/download"
  else
    base="https://github.com/$CAR_REPO/releases/download/v${version#v}"
  fi
  install_dir=${CAR_INSTALL:-${HOME:?HOME is not set; set CAR_INSTALL}/.car}
  asset="car-$platform.tar.gz"

  tmp=$(mktemp -d 2>/dev/null || mktemp -d -t car-install)
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 1' INT TERM

  say "Installing CAR ($version, $platform) into $install_dir/bin"
  download "$base/$asset" "$tmp/$asset"
  download "$base/SHA256SUMS" "$tmp/SHA256SUMS"

  expected=$(awk -v name="$asset" '$2 == name || $2 == "*" name { print $1; exit }' "$tmp/SHA256SUMS")
  [ -n "$expected" ] || die "SHA256SUMS has no entry for $asset; nothing was installed"
  actual=$(sha256 "$tmp/$asset")
  if [ "$actual" != "$expected" ]; then
    die "checksum mismatch for $asset (expected $expected, got $actual); the download is \
corrupt or was tampered with, so nothing was installed"
  fi
  say "Verified $asset (sha256 $actual)"

  mkdir "$tmp/unpacked"
  tar -xzf "$tmp/$asset" -C "$tmp/unpacked" || die "could not unpack $asset; nothing was installed"
  src="$tmp/unpacked/car-$platform"
  for bin in $BINS; do
    [ -f "$src/$bin" ] || die "$asset holds no $bin; nothing was installed"
  done

  mkdir -p "$install_dir/bin"
  for bin in $BINS; do
    # Next to the target, then renamed over it: a running car keeps its old file.
    install -m 0755 "$src/$bin" "$install_dir/bin/.$bin.new"
    mv -f "$install_dir/bin/.$bin.new" "$install_dir/bin/$bin"
  done
  say "Installed $("$install_dir/bin/car" --version) and car-gate, car-mcp, car-server, car-memgine-eval"

  if [ "${CAR_NO_PATH:-0}" != 1 ]; then
    print_path_line "$install_dir/bin"
  fi
  if [ "$plugin" = 1 ]; then
    add_plugin
  else
    say ""
    say "For the Claude Code plugin: claude plugin marketplace add $CAR_REPO && claude plugin install car@car"
    say "(or rerun this installer with CAR_PLUGIN=1)"
  fi
}

main "$@"
