// DistributedDataParallel itself, on Gloo thread ranks: bucket layout, overlap of communication
// with backward, no_sync() accumulation, and the unused-parameter error (and its opt-out).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <iostream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"
#include "ddph/ddp/distributed_data_parallel.h"

using namespace std::chrono_literals;

namespace ddph::ddp {
namespace {

// Runs body(comm) on `world` thread ranks; returns "ok" or the error of each rank.
std::vector<std::string> runRanks(int world, const std::function<void(comm::Communicator&)>& body) {
  auto store = comm::makeInProcessStore();
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < world; ++r) {
    results.push_back(std::async(std::launch::async, [=] {
      try {
        comm::GlooOptions options;
        options.timeout = 20s;
        auto comm = comm::connectGloo(store, r, world, options);
        body(*comm);
        comm->barrier("end");
        return std::string("ok");
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    }));
  }
  std::vector<std::string> out;
  for (auto& f : results) out.push_back(f.get());
  return out;
}

// Thread ranks build their replicas at the same time, and torch's default generator is
// process-wide: seeding and initialisation are serialised, or one replica's draws interleave with
// another's and a rank's initial parameters differ from the single-process reference.
std::mutex gInitMutex;

torch::nn::Sequential mlp(int seed) {
  std::lock_guard<std::mutex> lock(gInitMutex);
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::ReLU(), torch::nn::Linear(16, 16),
                               torch::nn::ReLU(), torch::nn::Linear(16, 3));
}

at::Tensor rankInput(int rank, int rows = 4) {
  return torch::arange(rows * 6, torch::kFloat).reshape({rows, 6}).div(10) * (rank + 1);
}

TEST(DistributedDataParallel, BucketsRespectTheCapInReverseOrder) {
  auto net = mlp(1);
  const auto results = runRanks(1, [&](comm::Communicator& c) {
    ddp::DdpOptions options;
    options.bucketCapBytes = 16 * 17 * 4;  // one 16x16 weight + bias fits, a 16x6 weight more
    ddp::DistributedDataParallel ddp(net.ptr(), c, options);
    const auto buckets = ddp.bucketAssignment();
    const auto params = net->parameters();
    std::vector<std::size_t> order;
    for (const auto& b : buckets) {
      std::size_t bytes = 0;
      for (auto i : b) {
        bytes += params[i].numel() * 4;
        order.push_back(i);
      }
      if (b.size() > 1 && bytes > options.bucketCapBytes) throw std::runtime_error("over cap");
    }
    // Every parameter once, last registered first.
    if (order != std::vector<std::size_t>{5, 4, 3, 2, 1, 0}) throw std::runtime_error("order");
    if (buckets.size() < 3) throw std::runtime_error("expected several buckets");
  });
  EXPECT_EQ(results[0], "ok");
}

// A communicator that counts started allreduces, to see when DDP launches its buckets.
class CountingCommunicator final : public comm::Communicator {
 public:
  explicit CountingCommunicator(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void setTimeout(std::chrono::milliseconds t) override { inner_.setTimeout(t); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  void allreduceBuffer(comm::Buffer d, comm::ReduceOp op, std::string_view s) override {
    inner_.allreduceBuffer(d, op, s);
  }
  std::unique_ptr<comm::PendingCollective> allreduceBufferAsync(comm::Buffer d, comm::ReduceOp op,
                                                                std::string_view s) override {
    ++started;
    return inner_.allreduceBufferAsync(d, op, s);
  }
  void broadcastBuffer(comm::Buffer d, int root, std::string_view s) override {
    inner_.broadcastBuffer(d, root, s);
  }
  std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> b, std::string_view s) override {
    return inner_.gatherBlocks(std::move(b), s);
  }
  void barrier(std::string_view s) override { inner_.barrier(s); }
  std::atomic<int> started{0};

 private:
  comm::Communicator& inner_;
};

// Buckets of the last layers are launched while backward still runs through the first layer.
TEST(DistributedDataParallel, LaunchesBucketsDuringBackward) {
  const auto results = runRanks(2, [&](comm::Communicator& c) {
    CountingCommunicator counting(c);
    auto net = mlp(2);
    ddp::DdpOptions options;
    options.bucketCapBytes = 16 * 17 * 4;
    ddp::DistributedDataParallel ddp(net.ptr(), counting, options);
    auto x = rankInput(c.rank()).requires_grad_(true);
    int launchedBeforeInputGrad = -1;
    // The gradient of the input is the last thing backward computes.
    x.register_hook([&](const at::Tensor& g) { launchedBeforeInputGrad = counting.started; });
    net->forward(x).sum().backward();
    const int total = counting.started;
    if (launchedBeforeInputGrad < 1 || total != static_cast<int>(ddp.bucketAssignment().size())) {
      throw std::runtime_error("launched " + std::to_string(launchedBeforeInputGrad) +
                               " of " + std::to_string(total) + " before the end of backward");
    }
  });
  EXPECT_EQ(results[0], "ok");
  EXPECT_EQ(results[1], "ok");
}

// no_sync: gradients stay local (and differ between ranks) while accumulating; the next
// synchronised backward averages the accumulated gradients.
TEST(DistributedDataParallel, NoSyncAccumulatesThenAveragesTheSum) {
  constexpr int kWorld = 3;
  std::vector<std::vector<at::Tensor>> local(kWorld), synced(kWorld);
  const auto results = runRanks(kWorld, [&](comm::Communicator& c) {
    const int r = c.rank();
    auto net = mlp(3 + r);  // different seeds: the broadcast must make them equal
    net->to(torch::kDouble);
    ddp::DistributedDataParallel ddp(net.ptr(), c);
    {
      auto guard = ddp.noSync();
      net->forward(rankInput(r).to(torch::kDouble)).pow(2).mean().backward();
      for (const auto& p : net->parameters()) local[r].push_back(p.grad().clone());
    }
    net->forward(rankInput(r, 2).to(torch::kDouble) + 1).pow(2).mean().backward();
    for (const auto& p : net->parameters()) synced[r].push_back(p.grad().clone());
    if (ddp.syncedSteps() != 1) throw std::runtime_error("synced steps");
  });
  for (const auto& r : results) ASSERT_EQ(r, "ok");
  // The same model on one process: the sum over ranks of both micro-batches' mean losses / W.
  auto single = mlp(3);
  single->to(torch::kDouble);
  for (int r = 0; r < kWorld; ++r) {
    (single->forward(rankInput(r).to(torch::kDouble)).pow(2).mean() / kWorld).backward();
    (single->forward(rankInput(r, 2).to(torch::kDouble) + 1).pow(2).mean() / kWorld).backward();
  }
  const auto params = single->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_FALSE(torch::allclose(local[0][i], local[1][i])) << "no_sync still synchronised";
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(torch::allclose(synced[r][i], params[i].grad(), 1e-10, 1e-12))
          << "rank " << r << " parameter " << i;
    }
  }
}

struct TwoHeads : torch::nn::Module {
  TwoHeads() {
    std::lock_guard<std::mutex> lock(gInitMutex);
    torch::manual_seed(4);
    trunk = register_module("trunk", torch::nn::Linear(6, 4));
    used = register_module("used", torch::nn::Linear(4, 2));
    unused = register_module("unused", torch::nn::Linear(4, 2));
  }
  at::Tensor forward(const at::Tensor& x) { return used->forward(trunk->forward(x)); }
  torch::nn::Linear trunk{nullptr}, used{nullptr}, unused{nullptr};
};

TEST(DistributedDataParallel, UnusedParameterIsAnErrorNamingIt) {
  const auto results = runRanks(2, [&](comm::Communicator& c) {
    auto net = std::make_shared<TwoHeads>();
    ddp::DistributedDataParallel ddp(net, c);
    net->forward(rankInput(c.rank())).sum().backward();
  });
  std::cout << results[0] << "\n";  // the message users see (shown in the README)
  for (const auto& r : results) {
    EXPECT_NE(r.find("received no gradient"), std::string::npos) << r;
    EXPECT_NE(r.find("unused.weight"), std::string::npos) << r;
    EXPECT_NE(r.find("Expected to have finished reduction"), std::string::npos) << r;
    EXPECT_NE(r.find("findUnusedParameters"), std::string::npos) << r;
  }
}

TEST(DistributedDataParallel, FindUnusedParametersAveragesTheUsedOnes) {
  std::vector<at::Tensor> grads(2), unusedGrad(2);
  const auto results = runRanks(2, [&](comm::Communicator& c) {
    auto net = std::make_shared<TwoHeads>();
    ddp::DdpOptions options;
    options.findUnusedParameters = true;
    options.bucketCapBytes = 32;  // the unused head shares no bucket with the used one
    ddp::DistributedDataParallel ddp(net, c, options);
    net->forward(rankInput(c.rank())).sum().backward();
    grads[c.rank()] = net->used->weight.grad().clone();
    unusedGrad[c.rank()] = net->unused->weight.grad();
  });
  for (const auto& r : results) ASSERT_EQ(r, "ok");
  auto single = std::make_shared<TwoHeads>();
  for (int r = 0; r < 2; ++r) (single->forward(rankInput(r)).sum() / 2).backward();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::allclose(grads[r], single->used->weight.grad(), 1e-5, 1e-6));
    EXPECT_FALSE(unusedGrad[r].defined()) << "a parameter no rank used got a gradient";
  }
}

}  // namespace
}  // namespace ddph::ddp
