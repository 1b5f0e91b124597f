#!/usr/bin/env bash
# The audit on real PyTorch Lightning programs: each program of integration/lightning_programs/ run
# under `ddp-sim launch --audit -n 4 --timeout 300 -- python3 PROGRAM ARGS`, its exit code and the
# property of its findings compared with integration/lightning_programs/expected.tsv. Lightning is not
# part of this project (nor a Debian package): bring your own tree. One command:
#   scripts/lightning-check.sh LIGHTNING [REGEX]
# LIGHTNING: the env.sh that ../shared/tools/lightning-env.sh writes (Lightning 2.1 from its git
#   sources, importable with Debian's torch 1.13), or the folder that holds it, or a folder to put on
#   PYTHONPATH in which `import lightning.pytorch` works (a Lightning tree's src/ whose dependencies
#   Python already finds).
# REGEX: run only the programs whose file name matches it (grep -E; `-R REGEX` as ctest takes it).
# Builds nothing: it uses $DDPH_BUILD_DIR/bin/ddp-sim (default build/bin/ddp-sim; scripts/build.sh).
# PYTHON: the interpreter that has torch (default /usr/bin/python3, Debian's).
# DDPH_LIGHTNING_CHECK_LOGS=DIR keeps each program's whole output there (PROGRAM.log); otherwise the
# outputs go to a temporary folder removed on exit. Each program runs in that folder (TMPDIR too),
# so the checkpoints and logs Lightning writes land there, not in the tree.
# One line a program: `ok`, `MISMATCH` (with the first finding line, or the launcher's last line) or
# `known` (a verdict expected.tsv marks as a known miss of the audit: reported apart, not a failure),
# then `N passed, M failed, K known`. A few seconds a program on 2 cores (all_gather_on_rank0 waits
# for Gloo's 30 s timeout).
# Exit: 0 every program as expected (known misses aside), 1 a mismatch, 2 cannot run here (bad
# arguments, Lightning not importable, no ddp-sim), one line on stderr.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
programs=$here/integration/lightning_programs
build=${DDPH_BUILD_DIR:-$here/build}
case $build in /*) ;; *) build=$here/$build ;; esac
sim=$build/bin/ddp-sim
python=${PYTHON:-/usr/bin/python3}

usage() {
  echo "usage: scripts/lightning-check.sh LIGHTNING_ENV_SH|LIGHTNING_DIR [REGEX | -R REGEX]" >&2
  exit 2
}
die2() { echo "lightning-check: $*" >&2; exit 2; }

if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage; fi
lightning=$1; shift
filter=
if [ $# -eq 2 ] && [ "$1" = -R ]; then filter=$2
elif [ $# -eq 1 ] && [ "$1" != -R ]; then filter=$1
elif [ $# -ne 0 ]; then usage
fi
if [ -n "$filter" ]; then
  rc=0; echo | grep -Eq -- "$filter" 2>/dev/null || rc=$?
  [ $rc -le 1 ] || die2 "bad REGEX '$filter' (grep -E)"
fi

# ---- Lightning ------------------------------------------------------------------------------------
if [ -f "$lightning" ]; then
  env_sh=$lightning
elif [ -d "$lightning" ] && [ -f "$lightning/env.sh" ]; then
  env_sh=$lightning/env.sh
elif [ -d "$lightning" ]; then
  env_sh=
  lightning=$(cd "$lightning" && pwd)
  export PYTHONPATH=$lightning${PYTHONPATH:+:$PYTHONPATH}
else
  die2 "no such file or folder: $lightning"
fi
if [ -n "$env_sh" ]; then
  set +u   # an env file may read unset variables
  # shellcheck disable=SC1090
  . "$env_sh" || { set -u; die2 "sourcing $env_sh failed"; }
  set -u
fi
[ -x "$python" ] || die2 "no Python at $python (set PYTHON to the one that has torch)"
version=$(timeout -k 10 120 "$python" -c 'import torch, lightning.pytorch as pl; print(pl.__version__, torch.__version__)' 2>&1) ||
  die2 "\`import lightning.pytorch\` fails with $python after $lightning: $(printf '%s\n' "$version" | grep -v '^\s*$' | tail -n 1)"
read -r pl_version torch_version <<<"$version"

# ---- ddp-sim --------------------------------------------------------------------------------------
[ -x "$sim" ] || die2 "no $sim: build it first (scripts/build.sh)"
[ -f "$programs/expected.tsv" ] || die2 "no $programs/expected.tsv"

# ---- The programs: expected.tsv's rows (program, args, expected exit, property, known), filtered ----
rows=()
while IFS= read -r line; do
  IFS=$'\037' read -r prog _ expected _ <<<"${line//$'\t'/$'\037'}"
  case $prog in "" | "#"* | program) continue ;; esac
  if [ -n "$filter" ] && ! grep -Eq -- "$filter" <<<"$prog"; then continue; fi
  [ -f "$programs/$prog" ] || die2 "expected.tsv names $prog, not in $programs"
  case $expected in 0 | 1) ;; *) die2 "expected.tsv: $prog: expected_exit '$expected' is not 0 or 1" ;; esac
  rows+=("$line")
done <"$programs/expected.tsv"
[ ${#rows[@]} -gt 0 ] || die2 "no program of expected.tsv matches '$filter'"

# ---- Where the runs write -------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/ddph-lightning-XXXXXX")
child=
# Each launch runs in the background and is waited for, so a signal to the script stops it at once
# (the launcher stops its ranks on SIGTERM) and the temporary folder goes on every exit.
cleanup() {
  if [ -n "$child" ]; then kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
logs=${DDPH_LIGHTNING_CHECK_LOGS:-$work/logs}
mkdir -p "$logs" "$work/run"
logs=$(cd "$logs" && pwd)

echo "lightning-check: lightning $pl_version, torch $torch_version ($python), $sim"
echo "lightning-check: each program: ddp-sim launch --audit -n 4 --timeout 300 -- $python PROGRAM ARGS"
passed=0 failed=0 known=0 total=0
failed_names=() known_names=()
start_all=$SECONDS
for line in "${rows[@]}"; do
  IFS=$'\037' read -r prog args expected eprop note <<<"${line//$'\t'/$'\037'}"
  total=$((total + 1))
  log=$logs/${prog%.py}.log
  read -ra argv <<<"$args"
  t0=$SECONDS
  rc=0
  (cd "$work/run" && exec env TMPDIR="$work/run" timeout -k 30 420 "$sim" launch --audit -n 4 --timeout 300 \
     -- "$python" "$programs/$prog" "${argv[@]}") >"$log" 2>&1 </dev/null &
  child=$!
  wait "$child" || rc=$?
  child=
  took=$((SECONDS - t0))
  # The audit's findings: `  FAIL PROPERTY …` (the ranks' own lines start with [rankN]).
  props=$(grep -E '^  FAIL [a-z-]+' "$log" | awk '{print $2}' | awk '!seen[$0]++' | paste -sd, - || true)
  match=0
  if [ "$rc" -eq "$expected" ]; then
    if [ "$expected" -eq 0 ]; then
      match=1
    else
      IFS='|' read -ra alts <<<"$eprop"
      for a in "${alts[@]}"; do [[ ",$props," == *",$a,"* ]] && match=1; done
      [ -n "$eprop" ] || match=1
    fi
  fi
  want="exit $expected${eprop:+ ($eprop)}"
  got="exit $rc${props:+ ($props)}"
  case $rc in 124 | 137) got="exit $rc (ran past the 420 s deadline)" ;; esac
  if [ $match -eq 1 ]; then
    passed=$((passed + 1))
    if [ -n "$note" ]; then
      echo "ok        $prog: $got as expected, ${took} s; expected.tsv still says '$note': drop that mark"
    else
      echo "ok        $prog: $got, ${took} s"
    fi
    continue
  fi
  # Its first finding; else (a silent pass) its first note, the verdict line, or the last line.
  first=$(grep -m 1 -E '^  FAIL ' "$log" || grep -m 1 -E '^  note: ' "$log" ||
          grep -m 1 -E '^audit of .*: (PASSED|FAILED)' "$log" ||
          grep -v '^\s*$' "$log" | tail -n 1 || true)
  first=$(printf '%s' "$first" | sed -E 's/^ +//' | cut -c1-240)
  if [ -n "$note" ]; then
    known=$((known + 1)); known_names+=("$prog")
    echo "known     $prog: $got where $want is true, ${took} s ($note): $first"
  else
    failed=$((failed + 1)); failed_names+=("$prog")
    echo "MISMATCH  $prog: expected $want, got $got, ${took} s: $first"
  fi
done

summary="$passed passed, $failed failed"
[ "$known" -eq 0 ] || summary+=", $known known (${known_names[*]})"
echo "lightning-check: $summary of $total programs in $((SECONDS - start_all)) s${DDPH_LIGHTNING_CHECK_LOGS:+; outputs in $logs}"
[ "$failed" -eq 0 ] || { echo "lightning-check: mismatched: ${failed_names[*]}"; exit 1; }
