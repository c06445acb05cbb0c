#!/bin/sh
# Writes DIR/SHA256SUMS over every other file in DIR (the release assets), sorted by name, in the
# format of `sha256sum` ("<hex>  <name>"), which `sha256sum -c` and `shasum -a 256 -c` check.
#
# Usage: dist/checksums.sh DIR
set -eu

[ $# -eq 1 ] || { echo "usage: dist/checksums.sh DIR" >&2; exit 2; }
cd "$1"
if command -v sha256sum >/dev/null 2>&1; then
  hash() { sha256sum "$1"; }
elif command -v shasum >/dev/null 2>&1; then
  hash() { shasum -a 256 "$1"; }
else
  echo "dist/checksums.sh: neither sha256sum nor shasum is installed" >&2
  exit 2
fi

sums=$(mktemp)
trap 'rm -f "$sums"' EXIT INT TERM
for asset in *; do
  [ -f "$asset" ] && [ "$asset" != SHA256SUMS ] || continue
  hash "$asset" | sed 's/^\([0-9a-f]*\) [ *]/\1  /' >>"$sums"
done
mv "$sums" SHA256SUMS
chmod 0644 SHA256SUMS
trap - EXIT INT TERM
