#!/usr/bin/env python3
"""Compiles the project's own sources with clang++ -fsyntax-only -std=c++17 -pedantic-errors.

    scripts/clang-cxx17-check.py BUILD_DIR [--jobs N] [--clang clang++] [--under DIR ...]

The build is GCC's; the fuzz targets are clang's (libFuzzer). GCC accepts constructs that ISO C++17
does not (a lambda capturing a structured binding, variable-length arrays, ...), so a tree that
builds here can fail to build for scripts/fuzz.sh. This check reads BUILD_DIR/compile_commands.json
(the GCC build's), replays every command of a source file under core/, simulator/, reference/ and
fuzz/ with clang instead, and prints clang's own diagnostics (FILE:LINE:COL: error: ...) for each
file that does not compile. Exit 0: every file compiled; 1: at least one did not; 2: bad input
(no compile_commands.json, no clang). ctest runs it as portability.clang_cxx17
(docs/reliability.md, "C++17 with clang").
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys

PRODUCT_FOLDERS = ("core", "simulator", "reference", "fuzz")
# GCC options that clang does not know; torch's imported targets carry none today, but a LibTorch
# built with GCC may (e.g. -fno-gnu-unique).
GCC_ONLY_FLAGS = {"-fno-gnu-unique", "-fconcepts", "-fno-semantic-interposition"}


def fail(message):
    print(f"clang-cxx17-check: {message}", file=sys.stderr)
    sys.exit(2)


def clang_command(entry, clang):
    """The entry's compile command with clang in place of the compiler, checking syntax only."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [clang]
    skip_next = False
    for a in args[1:]:
        if skip_next:
            skip_next = False
            continue
        if a == "-o":  # nothing is written
            skip_next = True
            continue
        if a in GCC_ONLY_FLAGS or a.startswith("-std="):
            continue
        out.append(a)
    # -Wno-unknown-warning-option: a -W flag only GCC knows is GCC's business, not a portability bug.
    return out + ["-std=c++17", "-pedantic-errors", "-fsyntax-only", "-Wno-unknown-warning-option"]


def check(entry, clang):
    cmd = clang_command(entry, clang)
    try:
        r = subprocess.run(cmd, cwd=entry["directory"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return entry["file"], False, "clang++ did not finish in 600 s"
    return entry["file"], r.returncode == 0, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--clang", default="clang++")
    ap.add_argument("--under", action="append", default=None,
                    help="check only sources under this folder of the source tree (repeatable)")
    ns = ap.parse_args()

    db = os.path.join(ns.build_dir, "compile_commands.json")
    try:
        with open(db) as f:
            entries = json.load(f)
    except OSError as e:
        fail(f"cannot read {db}: {e.strerror}; configure the build first (scripts/build.sh)")
    except ValueError as e:
        fail(f"{db} is not JSON: {e}")
    clang = shutil.which(ns.clang)
    if not clang:
        fail(f"'{ns.clang}' is not on PATH; install clang (scripts/install-deps.sh)")

    source_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folders = tuple(ns.under or PRODUCT_FOLDERS)
    chosen = []
    for e in entries:
        path = os.path.normpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(path, source_root)
        if not any(rel == f or rel.startswith(f.rstrip(os.sep) + os.sep) for f in folders):
            continue
        chosen.append(dict(e, file=rel))
    if not chosen:
        fail(f"no source under {', '.join(folders)} in {db}")

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, ns.jobs)) as pool:
        for file, ok, output in pool.map(lambda e: check(e, clang), chosen):
            if not ok:
                failed.append(file)
                sys.stdout.write(output if output.endswith("\n") else output + "\n")
    if failed:
        print(f"clang-cxx17-check: {len(failed)} of {len(chosen)} files are not ISO C++17 for clang: "
              + ", ".join(sorted(failed)))
        return 1
    print(f"clang-cxx17-check: {len(chosen)} files compile with clang++ -std=c++17 -pedantic-errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
