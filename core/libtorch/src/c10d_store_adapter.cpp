#include "c10d_store_adapter.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace ddph::libtorch {
namespace {

class RendezvousBackedStore final : public c10d::Store {
 public:
  explicit RendezvousBackedStore(std::shared_ptr<comm::RendezvousStore> store)
      : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    store_->set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    return store_->get(key, timeout_, "init");
  }
  int64_t add(const std::string& key, int64_t value) override { return store_->add(key, value); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    for (const auto& key : keys) store_->get(key, timeout, "init");
  }
  bool deleteKey(const std::string&) override { throw unsupported("deleteKey"); }
  bool check(const std::vector<std::string>&) override { throw unsupported("check"); }
  int64_t getNumKeys() override { throw unsupported("getNumKeys"); }

 private:
  static std::logic_error unsupported(const char* call) {
    return std::logic_error(std::string("the local store has no ") + call);
  }

  std::shared_ptr<comm::RendezvousStore> store_;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> asC10dStore(const std::shared_ptr<comm::RendezvousStore>& store) {
  if (const auto* native = static_cast<const c10::intrusive_ptr<c10d::Store>*>(store->c10dStore())) {
    return *native;
  }
  return c10::make_intrusive<RendezvousBackedStore>(store);
}

}  // namespace ddph::libtorch
