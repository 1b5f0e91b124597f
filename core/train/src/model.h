#pragma once
// The reference trainer's model: one MLP that accepts several datasets. Each dataset has its own
// input layer (features -> hidden); the hidden ReLU and the classifier head are shared:
//   logits = head(relu(input_<dataset>(x)))
// With one dataset (MNIST) this is exactly the MLP 784-128-10 of the benchmarks and of the
// Python peer. Private to ddph_train (torch in the header).

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddph::train {

struct ModelInput {
  std::string name;  ///< the dataset's name: the input layer is registered as "input_<name>"
  std::int64_t features = 0;
};

class MultiInputMlpImpl : public torch::nn::Module {
 public:
  MultiInputMlpImpl(const std::vector<ModelInput>& inputs, std::int64_t hidden,
                    std::int64_t classes);
  /// Logits of dataset `input`'s batch `x` ([batch, features]).
  torch::Tensor forward(std::size_t input, const torch::Tensor& x);

 private:
  std::vector<torch::nn::Linear> inputs_;
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(MultiInputMlp);

}  // namespace ddph::train
