// with_file_limit BYTES fail|kill -- PROGRAM ARGS…: runs PROGRAM with RLIMIT_FSIZE = BYTES, the
// tests' stand-in for a disk that fills up mid-write. "fail": SIGXFSZ is ignored, so the write
// that crosses the limit fails (EFBIG, on the same path as a full disk's ENOSPC); "kill": SIGXFSZ
// keeps its default action, so the writer dies in the middle of that write, as under a SIGKILL.
// Exit 125 when it cannot start PROGRAM.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 5 || std::string(argv[3]) != "--" ||
      (std::string(argv[2]) != "fail" && std::string(argv[2]) != "kill")) {
    std::fprintf(stderr, "usage: with_file_limit BYTES fail|kill -- PROGRAM ARGS...\n");
    return 125;
  }
  const rlim_t bytes = std::strtoull(argv[1], nullptr, 10);
  const rlimit limit{bytes, bytes};
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
    std::fprintf(stderr, "with_file_limit: setrlimit: %s\n", std::strerror(errno));
    return 125;
  }
  ::signal(SIGXFSZ, std::string(argv[2]) == "fail" ? SIG_IGN : SIG_DFL);
  ::execvp(argv[4], argv + 4);
  std::fprintf(stderr, "with_file_limit: cannot run %s: %s\n", argv[4], std::strerror(errno));
  return 125;
}
