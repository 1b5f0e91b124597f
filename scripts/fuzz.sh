#!/usr/bin/env bash
# Fuzzes every target of fuzz/ with libFuzzer (docs/reliability.md, "Fuzzing").
#   scripts/fuzz.sh [--merge] [SECONDS] [TARGET…]
# Builds the targets with clang under AddressSanitizer and UndefinedBehaviorSanitizer in
# build-fuzz/ (DDPH_FUZZ_BUILD_DIR), then runs each for SECONDS (default 60) on a copy of its seed
# corpus and regression inputs in a temporary folder (removed afterwards), with a 10 s limit per
# input and 2 GiB of memory. Prints one line per target: executions, executions per second,
# coverage, what was found. A crash, sanitizer report, leak, timeout or out-of-memory is kept in
# build-fuzz/findings/TARGET/ with libFuzzer's log, and the script exits 1.
# --merge adds the new interesting inputs of each run to fuzz/corpus/TARGET/ (nothing else is ever
# written into the repository). Needs clang and libFuzzer: scripts/install-deps.sh --fuzz.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

merge=0
if [[ $# -gt 0 && $1 == --merge ]]; then merge=1; shift; fi
seconds=60
# Base 10 (a leading 0 is not octal), at most 7 digits (a week and a half).
if [[ $# -gt 0 && $1 =~ ^[0-9]{1,7}$ ]]; then seconds=$((10#$1)); shift; fi
[[ $seconds -gt 0 ]] || { echo "fuzz: SECONDS must be positive" >&2; exit 2; }
all_targets=(line_protocol scenario_toml audit_trace ddp_sim_args ddp_train_args)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do  # a name of the list, not any folder ("", "../x", "line_protocol/")
  known=0
  for a in "${all_targets[@]}"; do [[ $t == "$a" ]] && known=1; done
  [[ $known -eq 1 ]] || { echo "fuzz: no target '$t' (one of: ${all_targets[*]})" >&2; exit 2; }
done

build=${DDPH_FUZZ_BUILD_DIR:-$here/build-fuzz}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddph-fuzz-XXXXXX")
child=
# The fuzzer runs in the background and is waited for, so a signal to the script stops it at once
# (a foreground child would run to its end first) and the temporary folder goes on every exit.
cleanup() {
  if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# libFuzzer comes with clang's runtime (Debian: libclang-rt-14-dev); a one-line program tells.
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$work/probe.cpp"
if ! command -v clang++ >/dev/null 2>&1 ||
   ! clang++ -fsanitize=fuzzer "$work/probe.cpp" -o "$work/probe" >/dev/null 2>&1; then
  echo "fuzz: clang++ with libFuzzer is missing; install it with: scripts/install-deps.sh --fuzz" >&2
  exit 2
fi

echo "fuzz: building the targets in $build (clang, libFuzzer, ASan + UBSan)"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DDDPH_FUZZ=ON -DDDPH_BUILD_TESTS=OFF \
  -DDDPH_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; exit 3; }
cmake --build "$build" --target fuzz_targets >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; exit 3; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
found=0
for t in "${targets[@]}"; do
  dir=$work/$t
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"
  if [[ -d fuzz/regressions/$t ]]; then cp fuzz/regressions/"$t"/* "$dir/corpus/"; fi
  status=0
  TMPDIR=$dir/tmp "$build/bin/${t}_fuzz" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" >"$dir/log" 2>&1 &
  child=$!
  wait "$child" || status=$?
  child=
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -n 1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$dir/log" | tail -n 1 | cut -d' ' -f2)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  artifacts=("$dir"/artifacts/*)
  if [[ $status -ne 0 || -e ${artifacts[0]} ]]; then
    found=1
    keep=$build/findings/$t
    mkdir -p "$keep"
    cp "$dir/log" "$keep/libfuzzer.log"
    kept=()
    for a in "${artifacts[@]}"; do
      [[ -e $a ]] || continue
      cp "$a" "$keep/"
      kept+=("$keep/$(basename "$a")")
    done
    printf '%-15s FOUND after %s executions (exit %s): %s; log %s\n' "$t" "${execs:-?}" "$status" \
      "${kept[*]:-no input kept}" "$keep/libfuzzer.log"
  else
    printf '%-15s %s executions in %s s, %s exec/s, coverage %s edges (%s features), corpus %s inputs, nothing found\n' \
      "$t" "${execs:-?}" "$seconds" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$corpus"
  fi
  if [[ $merge -eq 1 ]]; then
    before=$(find fuzz/corpus/"$t" -type f | wc -l)
    TMPDIR=$dir/tmp "$build/bin/${t}_fuzz" -merge=1 -rss_limit_mb=2048 -timeout=10 \
      fuzz/corpus/"$t" "$dir/corpus" >"$dir/merge.log" 2>&1 ||
      { echo "fuzz: merging into fuzz/corpus/$t failed:" >&2; tail -n 20 "$dir/merge.log" >&2; }
    echo "                merged: fuzz/corpus/$t has $(find fuzz/corpus/"$t" -type f | wc -l) inputs (was $before)"
  fi
done
if [[ $found -ne 0 ]]; then
  echo "fuzz: findings above; replay one with: $build/bin/TARGET_fuzz FILE" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, nothing found"
