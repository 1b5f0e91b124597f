// Finds and loads the on-demand LibTorch library (NOTE [LibTorch on demand] in
// ddph/common/libtorch_module.h).
#include <dlfcn.h>

#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "ddph/common/libtorch_module.h"
#include "ddph/common/error.h"
#include "libtorch_paths.h"

extern "C" {
using EntryFn = const ddph::libtorch::Backend* (*)();
}

namespace ddph::libtorch {

using common::Error;

namespace {

namespace fs = std::filesystem;

#define DDPH_STRINGIFY2(x) #x
#define DDPH_STRINGIFY(x) DDPH_STRINGIFY2(x)

std::atomic<const Backend*> g_backend{nullptr};

// Where the library may be, in the order tried: beside the running program (a build tree, or an
// installed prefix moved elsewhere), the libdir this build installs to, then the dynamic linker's
// own search (the program's RUNPATH: a consumer of the installed package gets one from
// find_package(ddph), cmake/DdphInstall.cmake).
std::vector<fs::path> candidates() {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / ".." / kLibDir / kLibraryFile).lexically_normal());
  out.push_back(fs::path(kInstallLibDir) / kLibraryFile);
  return out;
}

void* open(const char* path, std::string& tried) {
  void* handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) tried += fmt::format("{}{}", tried.empty() ? "" : "; ", ::dlerror());
  return handle;
}

const Backend* load() {
  std::string tried;
  void* handle = nullptr;
  for (const fs::path& path : candidates()) {
    std::error_code ec;
    if (fs::exists(path, ec)) {
      handle = open(path.c_str(), tried);
      if (handle != nullptr) break;
    }
  }
  if (handle == nullptr) handle = open(kLibraryFile, tried);
  if (handle == nullptr) {
    throw Error(fmt::format("LibTorch's part of ddp-harness cannot be loaded: {}", tried));
  }
  auto entry = reinterpret_cast<EntryFn>(::dlsym(handle, DDPH_STRINGIFY(DDPH_LIBTORCH_ENTRY)));
  if (entry == nullptr) {
    throw Error(fmt::format("the {} loaded is not this ddp-harness's (no {})", kLibraryFile,
                            DDPH_STRINGIFY(DDPH_LIBTORCH_ENTRY)));
  }
  return entry();  // the handle stays open for the life of the process
}

}  // namespace

const Backend& backend() {
  static std::once_flag once;
  std::call_once(once, [] { g_backend.store(load()); });
  const Backend* b = g_backend.load();
  DDPH_CHECK(b != nullptr, "LibTorch's part of ddp-harness failed to load earlier");
  return *b;
}

}  // namespace ddph::libtorch
