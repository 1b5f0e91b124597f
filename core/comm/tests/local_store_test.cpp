// The local store (NOTE [Local store]): clients in threads of this process and a server on a
// real Unix socket. Every ordering goes through the store itself: a get waits for a set that is
// made after it, a connect waits for a server that starts after it.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ddph/comm/local_store.h"
#include "ddph/common/error.h"
#include "ddph/common/private_folder.h"

using namespace std::chrono_literals;

namespace ddph::comm {

using common::ConfigError;
using common::PrivateFolder;
using common::ProtocolError;
using common::TimeoutError;

namespace {

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

// A deadline no loaded machine reaches: where a test needs one, it is never the thing tested.
constexpr auto kLong = std::chrono::milliseconds(10min);

TEST(LocalStore, GetWaitsForASetMadeAfterIt) {
  const PrivateFolder folder("ddph-test-");
  LocalStoreServer server(folder.path() + "/store");
  auto reader = connectLocalStore(server.path(), kLong);
  auto writer = connectLocalStore(server.path(), kLong);
  auto got = std::async(std::launch::async, [&] { return reader->get("key", kLong, "test"); });
  // The reader parks on the server; tell it apart from "already set" by asking through the store.
  writer->set("key", bytes("value"));
  EXPECT_EQ(text(got.get()), "value");
  EXPECT_EQ(text(reader->get("key", kLong, "test")), "value");  // there now: no wait
}

TEST(LocalStore, AddCountsAcrossClientsAndReadsAsDecimal) {
  const PrivateFolder folder("ddph-test-");
  LocalStoreServer server(folder.path() + "/store");
  std::vector<std::shared_ptr<RendezvousStore>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(connectLocalStore(server.path(), kLong));
  std::vector<std::future<std::int64_t>> adds;
  for (auto& c : clients) {
    adds.push_back(std::async(std::launch::async, [&c] { return c->add("n", 5); }));
  }
  std::vector<std::int64_t> totals;
  for (auto& a : adds) totals.push_back(a.get());
  std::sort(totals.begin(), totals.end());
  EXPECT_EQ(totals, (std::vector<std::int64_t>{5, 10, 15, 20, 25, 30, 35, 40}));
  EXPECT_EQ(text(clients[0]->get("n", kLong, "test")), "40");
  EXPECT_EQ(clients[1]->add("n", -41), -1);
}

TEST(LocalStore, LargeValuesArriveWhole) {
  const PrivateFolder folder("ddph-test-");
  LocalStoreServer server(folder.path() + "/store");
  auto a = connectLocalStore(server.path(), kLong);
  auto b = connectLocalStore(server.path(), kLong);
  std::vector<std::uint8_t> big(8 << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7919 >> 3);
  a->set("big", big);
  EXPECT_EQ(b->get("big", kLong, "test"), big);
}

TEST(LocalStore, AWaitPastItsDeadlineNamesKeyStepAndDeadlineThenTheConnectionIsBroken) {
  const PrivateFolder folder("ddph-test-");
  LocalStoreServer server(folder.path() + "/store");
  auto client = connectLocalStore(server.path(), kLong);
  try {
    client->get("never-set", 50ms, "epoch 3 step 7");
    FAIL() << "a key nobody sets was returned";
  } catch (const TimeoutError& e) {
    EXPECT_STREQ(e.what(), "store wait for 'never-set' at epoch 3 step 7 timed out after 50 ms");
  }
  // The server still owes that reply: the connection cannot be trusted any more.
  EXPECT_THROW(client->add("n", 1), ProtocolError);
  // Other clients are not affected.
  EXPECT_EQ(connectLocalStore(server.path(), kLong)->add("n", 1), 1);
}

TEST(LocalStore, AServerThatIsGoneFailsEveryCallAtOnce) {
  const PrivateFolder folder("ddph-test-");
  std::optional<LocalStoreServer> server(std::in_place, folder.path() + "/store");
  auto client = connectLocalStore(server->path(), kLong);
  // Whether the get is parked on the server or not yet sent when the server goes, it must fail
  // at once (closed connection or broken pipe), not at its deadline of minutes.
  auto parked = std::async(std::launch::async, [&] { return client->get("k", kLong, "init"); });
  server.reset();  // closes every connection
  try {
    parked.get();
    FAIL() << "a get on a closed store returned";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("the store's host is gone"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(folder.path() + "/store")) << "the socket file is left";
}

TEST(LocalStore, AClientWaitsForAServerThatStartsAfterIt) {
  const PrivateFolder folder("ddph-test-");
  const std::string path = folder.path() + "/store";
  auto connecting = std::async(std::launch::async, [&] { return connectLocalStore(path, kLong); });
  LocalStoreServer server(path);
  EXPECT_EQ(connecting.get()->add("n", 2), 2);
}

TEST(LocalStore, NoServerMeansATimeoutNamingThePath) {
  const PrivateFolder folder("ddph-test-");
  try {
    connectLocalStore(folder.path() + "/store", 30ms);
    FAIL() << "connected to nothing";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(folder.path() + "/store timed out after 30 ms"),
              std::string::npos)
        << e.what();
  }
}

TEST(LocalStore, AClientBreakingTheProtocolIsDroppedAndTheOthersGoOn) {
  const PrivateFolder folder("ddph-test-");
  LocalStoreServer server(folder.path() + "/store");
  const int raw = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strcpy(address.sun_path, server.path().c_str());
  ASSERT_EQ(::connect(raw, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const char garbage[] = "Xgarbage that is no request";
  ASSERT_EQ(::send(raw, garbage, sizeof(garbage), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(garbage)));
  char c;
  EXPECT_EQ(::recv(raw, &c, 1, 0), 0) << "the server kept a client that broke the protocol";
  ::close(raw);
  EXPECT_EQ(connectLocalStore(server.path(), kLong)->add("n", 3), 3);
}

TEST(LocalStore, ItsFolderIsPrivateAndTooLongAPathIsOneLine) {
  const PrivateFolder folder("ddph-test-");
  struct stat st{};
  ASSERT_EQ(::stat(folder.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string tooLong = folder.path() + "/" + std::string(120, 's');
  try {
    LocalStoreServer server(tooLong);
    FAIL() << "bound a path longer than a socket address holds";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("set TMPDIR to a shorter folder"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace ddph::comm
