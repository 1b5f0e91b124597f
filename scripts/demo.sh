#!/usr/bin/env bash
# The main job, for a first look: builds ddp-harness (installing what is missing when run as root),
# then shows
#   1. how PyTorch's DistributedSampler splits a small dataset across ranks, with the property report;
#   2. what the property suite finds in LibTorch's own C++ sampler;
#   3. a classic bug (a forgotten set_epoch) reproduced on 4 real Gloo rank processes and diagnosed;
#   4. the same pipeline done right;
#   5. the reference trainer on 4 CPU ranks training MNIST and a second dataset at once: with `zip`
#      most of MNIST is never seen (the story's silent truncation), with `cycle` all of it is;
#   6. a user's script audited (examples/python/forgot_set_epoch.py), and the first seed article's
#      own PyTorch training loop (examples/seeds/: its GPU code, nccl, torchvision) run on CPU ranks
#      with --cpu --stand-in-data and audited on 4 ranks: each bug named;
#   7. with --full only: the second article's loop, the article's 10 epochs of full MNIST and
#      CIFAR-10 on 4 CPU ranks (minutes): the zip() truncation named.
# Each step is announced on a line of its own before it starts. Under a minute on a built tree
# without --full (docs/demo.md has the time measured). Exits 0 when every step showed what it
# should (the bugs found, the healthy run passing); 2 for an unknown option.
#   scripts/demo.sh [--full]
set -euo pipefail
full=0
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown option '$arg' (scripts/demo.sh [--full])" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
steps=10
[ "$full" -eq 1 ] && steps=11
done_steps=0
announce() { done_steps=$((done_steps + 1)); printf '\n[%d/%d] %s\n' "$done_steps" "$steps" "$*"; }
step() { announce "\$ $*"; }

announce "building (scripts/build.sh; on a built tree only what changed)"
scripts/build.sh >/dev/null
announce "the MNIST files (scripts/fetch-mnist.sh; nothing to do when they are there)"
scripts/fetch-mnist.sh
sim=${DDPH_BUILD_DIR:-build}/bin/ddp-sim
train=${DDPH_BUILD_DIR:-build}/bin/ddp-train

expect() {  # expect CODE CMD…: runs CMD, which must exit with CODE
  local want=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "demo: expected exit $want from: $*; got $rc" >&2
    exit 1
  fi
  echo "(exit $rc)"
}

step ddp-sim sampler --dataset-size 10 --world-size 4 --epoch 1 --batch-size 2 --check
expect 0 "$sim" sampler --dataset-size 10 --world-size 4 --epoch 1 --batch-size 2 --check

step ddp-sim sampler --dataset-size 1 --world-size 3 --sampler libtorch-random --check
expect 1 "$sim" sampler --dataset-size 1 --world-size 3 --sampler libtorch-random --check

step ddp-sim run missing-set-epoch -n 4
expect 1 "$sim" run missing-set-epoch -n 4

step ddp-sim run healthy -n 4
expect 0 "$sim" run healthy -n 4

# The trainer's epoch summary must show what each mix does to MNIST.
train_shows() {  # train_shows TEXT MIX: runs the two-dataset training; its output must contain TEXT
  local want=$1 mix=$2 out
  out=$("$sim" launch -n 4 -- "$train" --dataset mnist,synthetic --dataset-size 6000 --mix "$mix" \
        --lr 0.05 --progress none 2>&1)
  echo "$out"
  if ! grep -q "$want" <<<"$out"; then
    echo "demo: expected '$want' in the output of --mix $mix" >&2
    exit 1
  fi
}
step ddp-sim launch -n 4 -- ddp-train --dataset mnist,synthetic --dataset-size 6000 --mix zip
train_shows "mnist: 6144 seen, 53856 never seen" zip
step ddp-sim launch -n 4 -- ddp-train --dataset mnist,synthetic --dataset-size 6000 --mix cycle
train_shows "mnist: 60000 seen, 0 never seen" cycle

# The audit of real PyTorch programs: Python's torch lives in the system Python.
python=""
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import torch" 2>/dev/null; then
    python=$(command -v "$candidate")
    break
  fi
done
[ -n "$python" ] || { echo "demo: no Python that imports torch (install python3-torch)" >&2; exit 1; }
audit_shows() {  # audit_shows TEXT SCRIPT LAUNCH-OPTIONS...: audits SCRIPT; it must report TEXT, exit 1
  local want=$1 script=$2 out rc=0
  shift 2
  out=$("$sim" launch --audit --cpu --stand-in-data "$@" --timeout 600 -- "$python" "$script" 2>&1) || rc=$?
  grep -v '^\[rank' <<<"$out" || true
  echo "(exit $rc)"
  if [ "$rc" -ne 1 ] || ! grep -q "$want" <<<"$out"; then
    echo "demo: expected '$want' and exit 1 from the audit of $script" >&2
    exit 1
  fi
}
step ddp-sim launch --audit -n 4 -- "$python" examples/python/forgot_set_epoch.py
audit_shows "FAIL reshuffle" examples/python/forgot_set_epoch.py -n 4
step ddp-sim launch --audit --cpu --stand-in-data -n 4 -- "$python" examples/seeds/article1_distributed_sampler.py
audit_shows "FAIL reshuffle" examples/seeds/article1_distributed_sampler.py -n 4
if [ "$full" -eq 1 ]; then
  step ddp-sim launch --audit --cpu --stand-in-data -n 1 --gpus 4 -- "$python" examples/seeds/article2_two_datasets.py
  audit_shows "9824 of 60000 indices are on no rank" examples/seeds/article2_two_datasets.py -n 1 --gpus 4
else
  printf '\n(the second article, 10 epochs of MNIST and CIFAR-10 on 4 CPU ranks, takes minutes: scripts/demo.sh --full runs it)\n'
fi
