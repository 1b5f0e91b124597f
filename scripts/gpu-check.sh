#!/usr/bin/env bash
# GPU checks, in one command, for a machine with NVIDIA GPUs (none of this runs on a CPU-only box):
#   1. finds a CUDA LibTorch: $DDPH_TORCH_CMAKE_PREFIX, else the one a Python torch ships
#      (torch.utils.cmake_prefix_path), asking every python3 it can find;
#   2. configures build-gpu/ against it (-DCMAKE_PREFIX_PATH=...), builds only what the checks need
#      (gpu_test, ddp-sim, ddp-train, nccl_allreduce_benchmark);
#   3. runs `ctest -L gpu` (NCCL collectives, DDP on CUDA against one process, ddp-train with NCCL);
#   4. trains ddp-train --backend nccl for one short epoch, W = number of GPUs, under
#      `ddp-sim launch -n W` (torchrun's variables), MNIST from data/mnist if present, else synthetic;
#   4c. audits a Python DDP script on the GPUs (NCCL): healthy under `ddp-sim launch --audit` and
#      under torchrun, and without set_epoch (the audit must name `reshuffle`);
#   5. measures ddph's NCCL allreduce bus bandwidth and, when nccl-tests' `all_reduce_perf` is on
#      PATH, puts NCCL's own figures beside it.
# DDPH_DEPS_PREFIX: a folder holding the other dependencies (CMake configs under it), for a GPU
# machine with no package registry: scripts/pack-deps.sh packs them on Debian and unpacks them there.
# Every step has a hard deadline (timeout); logs go to $DDPH_GPU_CHECK_LOGS (default
# build-gpu/gpu-check/). A summary at the end, one line a step.
# --build-only: stop after step 2 (the build tree is build-gpu/, or $DDPH_GPU_BUILD_DIR).
# --all-tests: then also build everything and run the whole CPU suite (ctest -LE gpu) against
#   this LibTorch: the one way to see the rest of ddp-harness work with a pip / 2.x LibTorch.
# Exit: 0 every step passed (or was skipped for a stated reason), 1 a step failed,
#       2 nothing to check here: no CUDA LibTorch found, or no GPU visible (one line on stderr).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DDPH_GPU_BUILD_DIR:-$here/build-gpu}
logs=${DDPH_GPU_CHECK_LOGS:-$build/gpu-check}
jobs=${DDPH_GPU_CHECK_JOBS:-$(nproc)}

die2() { echo "gpu-check: $*" >&2; exit 2; }
build_only=0 all_tests=0
case "${1:-}" in
  "") ;;
  --build-only) build_only=1 ;;
  --all-tests) all_tests=1 ;;
  *) die2 "unknown argument '$1' (usage: gpu-check.sh [--build-only | --all-tests])" ;;
esac

# ---- 1. A CUDA LibTorch ------------------------------------------------------------------------
prefix="" python="" nccl_include="" tried=()
probe='import os, torch
print(torch.utils.cmake_prefix_path)
print(torch.version.cuda or "")
print(int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
print(torch.__version__)
try:
    import nvidia.nccl
    print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))
except Exception:
    print("")'
if [ -n "${DDPH_TORCH_CMAKE_PREFIX:-}" ]; then
  prefix=$DDPH_TORCH_CMAKE_PREFIX
  cfg=$(find "$prefix" -maxdepth 4 -name TorchConfig.cmake 2>/dev/null | head -n 1)
  [ -n "$cfg" ] || die2 "DDPH_TORCH_CMAKE_PREFIX=$prefix holds no TorchConfig.cmake"
  libdir=$(cd "$(dirname "$cfg")/../../.." 2>/dev/null && pwd)
  compgen -G "$libdir/lib/libtorch_cuda*.so" >/dev/null || compgen -G "$prefix/lib/libtorch_cuda*.so" >/dev/null ||
    die2 "DDPH_TORCH_CMAKE_PREFIX=$prefix is a LibTorch without CUDA (no libtorch_cuda.so)"
  grep -q 'TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0"' "$cfg" &&
    die2 "the LibTorch at $prefix uses the pre-C++11 ABI; fmt, Boost, GTest here use the new one (take the cxx11-abi LibTorch)"
  tried+=("DDPH_TORCH_CMAKE_PREFIX")
else
  candidates=() seen=()
  for c in $(type -ap python3 python 2>/dev/null) /usr/bin/python3 /usr/local/bin/python3 \
           /opt/conda/bin/python3 /usr/bin/python3.* /usr/local/bin/python3.*; do
    [ -x "$c" ] || continue
    case "$c" in *-config) continue ;; esac
    real=$(readlink -f "$c")
    case " ${seen[*]-} " in *" $real "*) continue ;; esac
    seen+=("$real")
    candidates+=("$c")
  done
  old_abi=""
  for c in "${candidates[@]}"; do
    if ! out=$(timeout 120 "$c" -c "$probe" 2>/dev/null); then
      tried+=("$c: cannot import torch")
      continue
    fi
    { read -r p; read -r cuda; read -r abi; read -r version; read -r ninc; } <<<"$out"
    if [ -z "$cuda" ]; then tried+=("$c: torch $version without CUDA"); continue; fi
    if [ "$abi" = 0 ]; then old_abi="$c (torch $version)"; tried+=("$c: torch $version, pre-C++11 ABI"); continue; fi
    prefix=$p python=$c nccl_include=$ninc
    tried+=("$c: torch $version, CUDA $cuda")
    break
  done
  if [ -z "$prefix" ]; then
    hint="set DDPH_TORCH_CMAKE_PREFIX to a CUDA LibTorch (cxx11 ABI)"
    [ -n "$old_abi" ] && hint="$old_abi has CUDA but the pre-C++11 ABI, which cannot link with Debian's fmt/Boost/GTest; $hint"
    die2 "no CUDA LibTorch found (tried: $(printf '%s; ' "${tried[@]}" | sed 's/; $//')); $hint"
  fi
fi

# ---- GPUs ----------------------------------------------------------------------------------------
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(timeout 60 nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ "$gpus" -eq 0 ] && [ -n "$python" ]; then
  gpus=$(timeout 120 "$python" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
fi
[ "$gpus" -gt 0 ] 2>/dev/null || die2 "CUDA LibTorch at $prefix, but no GPU is visible (nvidia-smi -L lists none)"
world=$(( gpus > 8 ? 8 : gpus ))

mkdir -p "$logs"
echo "gpu-check: LibTorch $prefix${python:+ (from $python)}; $gpus GPU(s); logs in $logs"
names=() states=() notes=()
record() { names+=("$1"); states+=("$2"); notes+=("$3"); echo "gpu-check: $1: $2${3:+ — $3}"; }
# step NAME SECONDS LOG cmd...: runs cmd with a hard deadline; returns its status.
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local t0=$SECONDS rc
  echo "gpu-check: $name (deadline ${limit} s) ..."
  timeout --kill-after=15 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local took=$((SECONDS - t0))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    record "$name" FAIL "ran past its ${limit} s deadline (log: $log)"
  elif [ $rc -ne 0 ]; then
    # The first error line says why (a launcher's last line only says which rank stopped).
    local why
    why=$(grep -m 1 -iE 'error|fail|what\(\)' "$log" || grep -v '^\s*$' "$log" | tail -n 1)
    record "$name" FAIL "exit $rc after ${took} s: $(echo "$why" | cut -c1-240) (log: $log)"
  else
    record "$name" PASS "${took} s"
  fi
  return $rc
}

# ---- 2. Configure and build ----------------------------------------------------------------------
prefixes=$prefix
[ -n "${DDPH_DEPS_PREFIX:-}" ] && prefixes="$prefix;$DDPH_DEPS_PREFIX"
# CMAKE_POLICY_VERSION_MINIMUM: CMake 4 (pip's cmake) refuses package configs written for < 3.5.
config=(-S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefixes"
        -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DDDPH_BUILD_BENCHMARKS=ON -DDDPH_BUILD_TESTS=ON)
# NOTE [Which Gloo]: a LibTorch with Gloo inside can still keep Gloo's symbols to itself; then
# the direct engine has nothing to link against and is left out.
torch_cpu=$(find "$prefix/../.." "$prefix/../../.." -maxdepth 2 -name 'libtorch_cpu.so' 2>/dev/null | head -n 1)
# (grep -c, not grep -q: under pipefail grep -q's early exit fails nm with SIGPIPE.)
if [ -n "$torch_cpu" ] && command -v nm >/dev/null 2>&1 &&
   [ "$(nm -DC --defined-only "$torch_cpu" 2>/dev/null | grep -c 'gloo::allreduce(')" = 0 ]; then
  config+=(-DDDPH_DIRECT_GLOO=OFF)
  echo "gpu-check: $torch_cpu exports no gloo::allreduce: building without the direct Gloo engine"
fi
[ -n "$python" ] && config+=("-DDDPH_PYTHON=$python")
[ -n "$nccl_include" ] && [ -e "$nccl_include/nccl.h" ] && config+=("-DDDPH_NCCL_INCLUDE_DIR=$nccl_include")
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  config+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCUDAToolkit_ROOT=/usr/local/cuda)
fi
built=0
if step configure 600 "$logs/configure.log" cmake "${config[@]}"; then
  if ! grep -q 'CUDA in LibTorch: 1' "$logs/configure.log"; then
    record "CUDA in LibTorch" FAIL "CMake found LibTorch without CUDA (see $logs/configure.log)"
  else
    targets=(gpu_test ddp-sim ddp-train)
    # nccl_allreduce_benchmark exists only where CMake found CUDA in LibTorch.
    grep -q 'NCCL: built' "$logs/configure.log" && targets+=(nccl_allreduce_benchmark)
    # -k 0: every compile error in one log, not only the first target's.
    step build 2400 "$logs/build.log" cmake --build "$build" -j "$jobs" --target "${targets[@]}" -- -k 0 &&
      built=1
  fi
fi

if [ $built -eq 1 ] && [ $build_only -eq 1 ]; then
  echo "gpu-check: --build-only: built in $build"
  exit 0
fi
if [ $built -eq 1 ]; then
  bin=$build/bin
  # ---- 3. ctest -L gpu ---------------------------------------------------------------------------
  if step "ctest -L gpu" 1500 "$logs/ctest.log" \
       ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600; then
    skipped=$(sed -n '/The following tests did not run/,$p' "$logs/ctest.log" | grep -c 'Skipped' || true)
    # On a GPU machine only the tests that need more GPUs than there are may skip.
    if sed -n '/The following tests did not run/,$p' "$logs/ctest.log" |
         grep -Eq 'OneRank|OneGpu|TensorRoundTrips|DdpTrain'; then
      record "gpu tests ran" FAIL "one-GPU tests were skipped on a machine with $gpus GPU(s) (log: $logs/ctest.log)"
    else
      record "gpu tests ran" PASS "$(grep -E 'tests passed' "$logs/ctest.log" | tail -n 1); $skipped skipped (need more GPUs)"
    fi
  fi

  # ---- 4. ddp-train with NCCL ------------------------------------------------------------------
  data=(--dataset synthetic --dataset-size 60000)
  [ -s "$here/data/mnist/train-images-idx3-ubyte" ] && data=(--dataset mnist --mnist-dir "$here/data/mnist")
  report=$logs/train-report.json
  rm -f "$report"
  if step "ddp-train --backend nccl (W=$world)" 600 "$logs/train.log" \
       "$bin/ddp-sim" launch -n "$world" --timeout 540 -- "$bin/ddp-train" --backend nccl \
       "${data[@]}" --epochs 1 --batch-size 64 --seed 0 --progress lines --report-json "$report"; then
    summary=$(python3 - "$report" <<'EOF' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
e = r["epochs"][-1]
print(f"world_size {r['world_size']}, {e['steps']} steps, loss {e['loss']:.4f}, "
      f"eval accuracy {e.get('eval_accuracy', float('nan')):.4f}, {r['samples_per_s']:.0f} samples/s")
EOF
    ) && record "ddp-train report" PASS "$summary" || record "ddp-train report" FAIL "$summary"
  fi

  # ---- 4b. Throughput: ddp-train against Python DDP, both on NCCL ---------------------------------
  if [ -s "$here/data/mnist/train-images-idx3-ubyte" ]; then
    worlds=(1); [ "$world" -gt 1 ] && worlds+=("$world")
    step "throughput ddp-train vs Python DDP (nccl, W=${worlds[*]})" 900 "$logs/train-bench.log" \
      env DDPH_BUILD_DIR="$build" DDPH_BENCH_PYTHON="$python" \
      "$here/benchmarks/run_train_benchmark.sh" --backend nccl --worlds "${worlds[@]}" --repeats 1 &&
      grep -E '^(W=|ddp-train at least)' "$logs/train-bench.log"
  else
    record "throughput vs Python DDP (nccl)" SKIP "no MNIST in data/mnist (scripts/fetch-mnist.sh)"
  fi

  # ---- 4c. The audit on CUDA/NCCL: a Python DDP script, under launch --audit and torchrun --------
  # integration/audit_programs/ddp_on_device.py on the GPUs: healthy as written (the report must pass
  # and hold one DDP bucket allreduce per backward: the bucket watch works on CUDA), `reshuffle`
  # without set_epoch, and the same healthy run under torchrun (--standalone) audited afterwards
  # (`--redirects 9:0 --tee 9:0`: torch 1.13's torchrun on Python 3.11, docs/audit.md; its
  # torchelastic_* log folders land in $logs).
  if [ -z "$python" ]; then
    record "audit on NCCL" SKIP "no Python torch with CUDA was found (DDPH_TORCH_CMAKE_PREFIX was given)"
  else
    prog=$here/integration/audit_programs/ddp_on_device.py
    audit_summary() {  # the report of a healthy run: passed, and a DDP allreduce per backward
      python3 - "$1" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
seen = r["seen"]
ddp = seen["collectives_by_op"].get("all_reduce (DDP)", 0)
backwards = sum(int(n) for n in re.findall(r"(\d+) backwards", " ".join(seen["ddp_modules"])))
print(f"passed {str(r['passed']).lower()}, {r['ranks_traced']} of {r['world_size']} ranks traced, "
      f"{ddp} DDP bucket allreduces for {backwards} backwards on rank 0")
sys.exit(0 if r["passed"] and ddp > 0 and ddp == backwards else 1)
EOF
    }
    rm -f "$logs/audit-healthy.json"
    if step "audit: healthy DDP on NCCL (W=$world)" 600 "$logs/audit-healthy.log" \
         "$bin/ddp-sim" launch --audit --report "$logs/audit-healthy.json" -n "$world" --timeout 540 \
         -- "$python" "$prog"; then
      summary=$(audit_summary "$logs/audit-healthy.json" 2>&1) &&
        record "audit report (NCCL)" PASS "$summary" || record "audit report (NCCL)" FAIL "$summary"
    fi
    t0=$SECONDS
    timeout --kill-after=15 600 "$bin/ddp-sim" launch --audit -n "$world" --timeout 540 \
      -- "$python" "$prog" --no-set-epoch >"$logs/audit-no-set-epoch.log" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q "FAIL reshuffle at epoch 0" "$logs/audit-no-set-epoch.log"; then
      record "audit: no set_epoch on NCCL is reshuffle" PASS "$((SECONDS - t0)) s"
    else
      record "audit: no set_epoch on NCCL is reshuffle" FAIL \
        "exit $rc, expected 1 with 'FAIL reshuffle at epoch 0' (log: $logs/audit-no-set-epoch.log)"
    fi
    traces=$logs/audit-torchrun-trace
    rm -rf "$traces" "$logs/audit-torchrun.json"
    mkdir -p "$traces"
    if step "audit: torchrun --standalone on NCCL (W=$world)" 600 "$logs/audit-torchrun.log" \
         env PYTHONPATH="$here/python" TMPDIR="$logs" "$python" -m torch.distributed.run --standalone \
         --nproc_per_node "$world" --redirects 9:0 --tee 9:0 -m ddph_audit --trace-dir "$traces" \
         "$prog" &&
       step "ddp-sim audit of the torchrun trace" 120 "$logs/audit-torchrun-audit.log" \
         "$bin/ddp-sim" audit "$traces" --report "$logs/audit-torchrun.json"; then
      summary=$(audit_summary "$logs/audit-torchrun.json" 2>&1) &&
        record "audit report (torchrun, NCCL)" PASS "$summary" ||
        record "audit report (torchrun, NCCL)" FAIL "$summary"
    fi
  fi

  # ---- 5. Allreduce bus bandwidth: ddph against nccl-tests -------------------------------------
  sizes=(-b 1M -e 256M -f 4 -w 5 -n 20)
  if step "ddph allreduce bandwidth (W=$world)" 600 "$logs/ddph-allreduce.log" \
       "$bin/ddp-sim" launch -n "$world" --timeout 540 -- "$bin/nccl_allreduce_benchmark" "${sizes[@]}"; then
    if command -v all_reduce_perf >/dev/null 2>&1; then
      if step "nccl-tests all_reduce_perf (-g $world)" 600 "$logs/nccl-tests.log" \
           all_reduce_perf "${sizes[@]}" -g "$world" -c 1; then
        # In-place columns: the last four fields (time, algbw, busbw, #wrong). At W = 1 busbw is
        # 0 on both sides, so algbw is compared instead.
        col=busbw; [ "$world" -eq 1 ] && col=algbw
        awk -v col="$col" '
          FNR == 1 { file++ }
          { sub(/^\[rank[0-9]+\]: /, "") }  # ddp-sim launch prefixes every line of a rank
          /^ *[0-9]/ { n = NF; v = (col == "busbw") ? $(n - 1) : $(n - 2)
                       if (file == 1) ddph[$1] = v; else nccl[$1] = v }
          END { printf "%14s %16s %16s %8s\n", "size(B)", "nccl " col " GB/s", "ddph " col " GB/s", "ddph/nccl"
                for (s in ddph) if (s in nccl) printf "%14s %16.2f %16.2f %8.2f\n", s, nccl[s], ddph[s],
                                                     (nccl[s] > 0 ? ddph[s] / nccl[s] : 0) }' \
          "$logs/ddph-allreduce.log" "$logs/nccl-tests.log" | sort -n >"$logs/bandwidth.txt"
        cat "$logs/bandwidth.txt"
        record "bandwidth comparison" PASS "$logs/bandwidth.txt"
      fi
    else
      sed -E 's/^\[rank[0-9]+\]: //' "$logs/ddph-allreduce.log" | grep -E '^#? *(size|[0-9])'
      echo "(ddph's allreduce, in nccl-tests' in-place columns; log: $logs/ddph-allreduce.log)"
      record "nccl-tests comparison" SKIP "all_reduce_perf (nccl-tests) is not on PATH"
    fi
  fi
fi

# ---- 6. The whole CPU suite against this LibTorch (--all-tests) --------------------------------
if [ $built -eq 1 ] && [ $all_tests -eq 1 ]; then
  if step "build all" 2400 "$logs/build-all.log" cmake --build "$build" -j "$jobs" -- -k 0; then
    step "ctest -LE gpu" 3000 "$logs/ctest-all.log" \
      ctest --test-dir "$build" -LE gpu -j "$(( jobs > 8 ? 8 : jobs ))" --timeout 600 --output-on-failure &&
      grep -E 'tests passed' "$logs/ctest-all.log"
  fi
fi

# ---- Summary ---------------------------------------------------------------------------------------
echo
echo "gpu-check summary ($gpus GPU(s), LibTorch $prefix):"
failed=0
for i in "${!names[@]}"; do
  printf '  %-4s %s%s\n' "${states[$i]}" "${names[$i]}" "${notes[$i]:+: ${notes[$i]}}"
  [ "${states[$i]}" = FAIL ] && failed=1
done
if [ $built -ne 1 ]; then
  echo "  (the checks after the build did not run)"
fi
exit $failed
