"""What the benchmark peers share: which BLAS this process loaded (Debian's LibTorch calls the
generic libblas.so.3, so LD_LIBRARY_PATH decides; see benchmarks/blas_env.sh)."""


def blas_in_use():
    """The libblas.so.3 this process loaded."""
    with open("/proc/self/maps") as f:
        for line in f:
            if "libblas.so" in line or "libopenblas" in line:
                return line.split()[-1]
    return "unknown"
