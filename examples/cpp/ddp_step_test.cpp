// A user's DDP step, built against the INSTALLED package (ddph::ddp): two ranks in threads over an
// in-process store and Gloo, one DistributedDataParallel step each; both must end with the mean
// of their gradients, and the trainer library (ddph::train) must link as well.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/ddp/distributed_data_parallel.h"
#include "ddph/train/trainer.h"

TEST(InstalledDdp, OneStepAveragesGradients) {
  auto store = ddph::comm::makeInProcessStore();
  std::vector<torch::Tensor> grads(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto comm = ddph::comm::connectGloo(store, r, 2, ddph::comm::GlooOptions{});
      auto model = std::make_shared<torch::nn::LinearImpl>(3, 1);
      ddph::ddp::DistributedDataParallel ddp(model, *comm);  // rank 0's weights on both
      // Rank r's batch is all (r + 1): d(sum(w . x + b))/dw = 4 (r + 1) on 4 rows.
      auto x = torch::full({4, 3}, static_cast<float>(r + 1));
      model->forward(x).sum().backward();
      grads[static_cast<std::size_t>(r)] = model->weight.grad().clone();
    });
  }
  for (auto& t : ranks) t.join();
  // The mean of 4 and 8: 6 on every rank.
  EXPECT_TRUE(torch::allclose(grads[0], torch::full({1, 3}, 6.0f)));
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  // ddph::train links: its torch-free entry point is there.
  EXPECT_NE(&ddph::train::runTraining, nullptr);
}
