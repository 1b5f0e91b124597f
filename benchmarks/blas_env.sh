# Sourced by the benchmark scripts: DDPH_BLAS_DIR, a folder with another libblas.so.3
# (scripts/fetch-openblas.sh), is put first for both sides (C++ and Python), with one BLAS thread
# per rank like one torch thread per rank.
if [ -n "${DDPH_BLAS_DIR:-}" ]; then
  export LD_LIBRARY_PATH=$DDPH_BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPENBLAS_NUM_THREADS=1
fi
