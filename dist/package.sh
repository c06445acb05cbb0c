#!/bin/sh
# Builds CAR's release binaries for one target and packages them as a release archive:
#   car-<platform>.tar.gz (car-<platform>.zip for win32), holding one directory car-<platform>/
#   with car, car-mcp, car-memgine-eval (.exe on Windows), LICENSE and README.md;
# then rewrites SHA256SUMS over every asset in the output directory (dist/checksums.sh).
#
# Usage: dist/package.sh --target <rust-triple> [--platform <name>] [--bin-dir DIR] [--out DIR]
#                        [--version V]
#   --target    x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu, aarch64-apple-darwin,
#               x86_64-apple-darwin or x86_64-pc-windows-msvc
#   --platform  the asset's platform name (default: the target's: linux-x64-gnu, linux-arm64-gnu,
#               darwin-arm64, darwin-x64, win32-x64-msvc)
#   --bin-dir   package the binaries already in DIR instead of running
#               `cargo build --release --locked --target <target>`
#   --out       where the archive and SHA256SUMS go (default: target/dist)
#   --version   the version being released (a tag such as v0.1.0 works); the script fails when it
#               is not Cargo.toml's, so a tag cannot ship binaries of another version
set -eu

BINS="car car-mcp car-memgine-eval"

die() {
  printf 'dist/package.sh: %s\n' "$1" >&2
  exit 2
}

root=$(cd "$(dirname "$0")/.." && pwd)
target='' platform='' bin_dir='' out="$root/target/dist" version=''
while [ $# -gt 0 ]; do
  case "$1" in
    --target) [ $# -ge 2 ] || die "--target needs a value"; target=$2; shift 2 ;;
    --platform) [ $# -ge 2 ] || die "--platform needs a value"; platform=$2; shift 2 ;;
    --bin-dir) [ $# -ge 2 ] || die "--bin-dir needs a value"; bin_dir=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; out=$2; shift 2 ;;
    --version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ -n "$target" ] || die "--target is required (see --help)"

if [ -z "$platform" ]; then
  case "$target" in
    x86_64-unknown-linux-gnu) platform=linux-x64-gnu ;;
    aarch64-unknown-linux-gnu) platform=linux-arm64-gnu ;;
    aarch64-apple-darwin) platform=darwin-arm64 ;;
    x86_64-apple-darwin) platform=darwin-x64 ;;
    x86_64-pc-windows-msvc) platform=win32-x64-msvc ;;
    *) die "no platform name for target $target: pass --platform" ;;
  esac
fi

crate_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
if [ -n "$version" ] && [ "${version#v}" != "$crate_version" ]; then
  die "version $version is not Cargo.toml's $crate_version"
fi

exe=''
case "$platform" in
  win32-*) exe=.exe ;;
esac

if [ -z "$bin_dir" ]; then
  set -- build --release --locked --target "$target"
  for bin in $BINS; do
    set -- "$@" --bin "$bin"
  done
  (cd "$root" && cargo "$@")
  bin_dir="$root/target/$target/release"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT INT TERM
dir="$stage/car-$platform"
mkdir "$dir"
for bin in $BINS; do
  [ -f "$bin_dir/$bin$exe" ] || die "missing binary $bin_dir/$bin$exe"
  cp "$bin_dir/$bin$exe" "$dir/"
  chmod 0755 "$dir/$bin$exe"
done
cp "$root/LICENSE" "$root/README.md" "$dir/"

case "$platform" in
  win32-*)
    asset="car-$platform.zip"
    rm -f "$out/$asset"
    if command -v zip >/dev/null 2>&1; then
      (cd "$stage" && zip -qr "$out/$asset" "car-$platform")
    elif command -v 7z >/dev/null 2>&1; then
      (cd "$stage" && 7z a -tzip -bd "$out/$asset" "car-$platform" >/dev/null)
    elif command -v python3 >/dev/null 2>&1; then
      (cd "$stage" && python3 -m zipfile -c "$out/$asset" "car-$platform")
    else
      die "none of zip, 7z and python3 is installed"
    fi
    ;;
  *)
    asset="car-$platform.tar.gz"
    (cd "$stage" && tar -czf "$out/$asset" "car-$platform")
    ;;
esac

"$root/dist/checksums.sh" "$out"
printf '%s\n' "$out/$asset"
