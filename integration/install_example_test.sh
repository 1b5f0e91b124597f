#!/usr/bin/env bash
# Installs ddp-harness from its build tree into a private prefix, then configures, builds and tests
# examples/cpp against the INSTALLED package (find_package(ddph)), as a user's project would. With a
# Python, the installed share/ddph/python is then made read-only and `pip install`ed, offline, into
# a venv that Python makes (--system-site-packages, so that its torch is seen): the install must
# write nothing into that folder, and the venv must import the recorder from the venv.
#   install_example_test.sh <build dir> <source dir> [python that imports torch]
set -euo pipefail
build=$1
source=$2
python=${3:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddph-install-example-XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
cmake -S "$source/examples/cpp" -B "$tmp/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DDDPH_PYTHON="$python"
cmake --build "$tmp/build" --parallel 2
# The example must register its checks (3 GoogleTest tests, 1 built-in, the DDP step, one call
# into each library; 2 more with Python).
expected=6
if [ -n "$python" ]; then expected=8; fi
count=$(ctest --test-dir "$tmp/build" -N | sed -n 's/^Total Tests: //p')
if [ "$count" != "$expected" ]; then
  echo "install_example_test: expected $expected registered tests, found $count" >&2
  exit 1
fi
ctest --test-dir "$tmp/build" --output-on-failure --timeout 300 --parallel 2

if [ -n "$python" ]; then
  packages="$tmp/prefix/share/ddph/python"
  chmod -R a-w "$packages"   # root writes anyway: the listing before and after is the check
  (cd "$packages" && find . | sort) > "$tmp/before"
  "$python" -m venv --system-site-packages "$tmp/venv"
  (cd "$tmp" && timeout 300 "$tmp/venv/bin/python" -m pip install --no-index "$packages" \
     > "$tmp/pip.log" 2>&1) || { cat "$tmp/pip.log" >&2; exit 1; }
  grep -q "Successfully installed ddp-harness-" "$tmp/pip.log"
  (cd "$packages" && find . | sort) > "$tmp/after"
  if ! diff "$tmp/before" "$tmp/after" >&2; then
    echo "install_example_test: pip install wrote into $packages (above)" >&2
    exit 1
  fi
  where=$(cd "$tmp" && "$tmp/venv/bin/python" -c "import ddph_audit, ddph_emulation, ddph_launch; print(ddph_audit.__file__)")
  case "$where" in
    "$tmp/venv/"*) ;;
    *) echo "install_example_test: ddph_audit imported from $where, not the venv" >&2; exit 1 ;;
  esac
  chmod -R u+w "$packages"
fi
