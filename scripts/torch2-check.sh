#!/usr/bin/env bash
# The tests that run Python, against torch 2.x from Debian's own packages, beside the usual build
# against Debian 12's torch 1.13. One command, as root:
#   scripts/torch2-check.sh [ctest arguments…]
# DDPH_TORCH2_SUITE picks the Debian suite: trixie (the default: Debian 13, torch 2.6), forky
# (testing) or sid (torch 2.14 when written).
#   1. debootstraps the suite into .cache/torch2/SUITE/root and installs python3-torch there (once:
#      about 2 minutes and 1.6 GB; debootstrap and apt from Debian's mirror, nothing else);
#   2. takes scripts/torch2-python as the Python (through .cache/torch2/SUITE/python3, which names
#      the suite): that root's python3 in a mount namespace of its
#      own (this tree, /tmp and $TMPDIR at their own paths; the host's network, processes and
#      signals, so gloo on loopback, the launcher's process groups and its signals reach the ranks
#      as they reach a host Python);
#   3. configures $DDPH_TORCH2_BUILD_DIR (default build-torch2-SUITE/) with -DDDPH_PYTHON=that,
#      builds (ccache makes it the usual build's objects) and runs ctest, by default on the tests that
#      run Python ranks or Python samplers: labels audit and elastic, then the others whose names say
#      Torch, Python or LineProtocol. ctest arguments given here replace that. Not the `oracle`
#      tests: their Python starts this build's ddp-sim, a Debian 12 binary the Debian 13 root cannot
#      run (they ran against pip's torch 2.11 on the GPU machine, docs/gpu.md).
# The C++ side stays on the host's LibTorch 1.13: what changes is every Python rank, sampler and
# audited script. docs/torch2.md has the figures.
# Exit: ctest's (0 all passed); 2 when this machine cannot do it (not root, not Debian, no network
# to Debian's mirror), one line on stderr.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=${DDPH_TORCH2_SUITE:-trixie}
case $suite in *[!a-z0-9-]* | "") echo "torch2-check: bad DDPH_TORCH2_SUITE '$suite'" >&2; exit 2 ;; esac
cache=$here/.cache/torch2/$suite
root=$cache/root
build=${DDPH_TORCH2_BUILD_DIR:-$here/build-torch2-$suite}
mirror=${DDPH_TORCH2_MIRROR:-http://deb.debian.org/debian}

die2() { echo "torch2-check: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die2 "run as root (debootstrap and apt-get inside the new root need it)"
command -v apt-get >/dev/null || die2 "not a Debian machine (no apt-get)"

# ---- 1. The suite's root with python3-torch --------------------------------------------------------
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null || die2 "cannot install debootstrap"
fi
if [ ! -f "$root/.ddph-torch2-ready" ]; then
  rm -rf "$root.partial"
  mkdir -p "$cache"
  echo "torch2-check: debootstrap $suite into .cache/torch2/$suite/root"
  script=/usr/share/debootstrap/scripts/$suite   # Debian 12's debootstrap knows no suite after trixie
  [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
  debootstrap --variant=minbase "$suite" "$root.partial" "$mirror" "$script" \
    >"$cache/debootstrap.log" 2>&1 ||
    die2 "debootstrap $suite failed (log: .cache/torch2/$suite/debootstrap.log)"
  cp /etc/resolv.conf "$root.partial/etc/resolv.conf"
  echo "torch2-check: apt-get install python3-torch in it"
  in_root=(chroot "$root.partial" /usr/bin/env DEBIAN_FRONTEND=noninteractive)
  unshare --mount --propagation private /bin/sh -ec 'mount -t proc proc "$1/proc"; shift; exec "$@"' \
    sh "$root.partial" "${in_root[@]}" apt-get install -y -q --no-install-recommends python3-torch \
    >"$cache/apt.log" 2>&1 ||
    die2 "apt-get install python3-torch in the $suite root failed (log: .cache/torch2/$suite/apt.log)"
  touch "$root.partial/.ddph-torch2-ready"
  rm -rf "$root"
  mv "$root.partial" "$root"
fi

# ---- 2. The Python: scripts/torch2-python, for this suite -------------------------------------
wrapper=$cache/python3
printf '#!/bin/sh\n# Written by scripts/torch2-check.sh.\nDDPH_TORCH2_SUITE=%s\nexport DDPH_TORCH2_SUITE\nexec %q "$@"\n' \
  "$suite" "$here/scripts/torch2-python" >"$wrapper.tmp"
chmod 755 "$wrapper.tmp"
mv "$wrapper.tmp" "$wrapper"
version=$("$wrapper" -c 'import torch, torch.distributed as d; print(torch.__version__, "gloo" if d.is_gloo_available() else "no-gloo")') ||
  die2 "the $suite root's python3 does not import torch"
echo "torch2-check: DDPH_PYTHON = .cache/torch2/$suite/python3 (torch $version)"

# ---- 3. Build and test ---------------------------------------------------------------------------
DDPH_BUILD_DIR=$build "$here/scripts/build.sh" "-DDDPH_PYTHON=$wrapper"
"$here/scripts/fetch-mnist.sh"
cd "$build"
run_ctest() { ctest --output-on-failure --parallel "$(nproc)" --timeout 900 "$@"; }
if [ $# -gt 0 ]; then
  run_ctest "$@"
else
  rc=0
  run_ctest -L 'audit|elastic' || rc=$?
  run_ctest -LE 'audit|elastic|oracle|gpu' -R 'Torch|Python|LineProtocol' || rc=$?
  exit $rc
fi
