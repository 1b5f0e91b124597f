#include "model.h"

#include <torch/nn/functional/activation.h>

namespace ddph::train {

MultiInputMlpImpl::MultiInputMlpImpl(const std::vector<ModelInput>& inputs, std::int64_t hidden,
                                     std::int64_t classes) {
  for (const auto& input : inputs) {
    inputs_.push_back(
        register_module("input_" + input.name, torch::nn::Linear(input.features, hidden)));
  }
  head_ = register_module("head", torch::nn::Linear(hidden, classes));
}

torch::Tensor MultiInputMlpImpl::forward(std::size_t input, const torch::Tensor& x) {
  return head_(torch::relu(inputs_.at(input)(x)));
}

}  // namespace ddph::train
