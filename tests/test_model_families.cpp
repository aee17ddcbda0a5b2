// The model families' descriptors (core/model/model_family.hpp) against the models they describe:
// every parameter a built model declares, with its checkpoint name and shape, is one the descriptor
// lists, and no other; so the parameter count, which sums the descriptor's list, is the model's.
// And counts published by the models' authors, as an independent check of the sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/make_model.hpp"
#include "core/model/model_family.hpp"
#include "core/model/ops_attention_kernel.hpp"
#include "kernels/cpu/attention_kernels.hpp"

namespace strata {
namespace {

using Shapes = std::map<std::string, std::vector<std::int64_t>>;

Shapes declared(const ModelSpec& spec) {
  const std::unique_ptr<Backend> device = make_cpu_backend(0);
  const std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  const std::unique_ptr<Model> model = make_model(spec, *device, *attention, model_options(1));
  Shapes shapes;
  for (const ParameterRows& rows : model->parameters()) shapes[rows.name] = model->stored_shape(rows);
  return shapes;
}

Shapes described(const ModelSpec& spec) {
  Shapes shapes;
  for (const ParameterTensor& tensor : spec.family().parameter_tensors(spec.shape)) {
    EXPECT_TRUE(shapes.emplace(tensor.name, tensor.shape).second) << tensor.name << " listed twice";
  }
  return shapes;
}

ModelSpec llama_like(const std::string& arch, bool tied) {
  ModelSpec spec;
  spec.arch = arch;
  spec.shape = ModelShape{3, 4, 2, 32, 48, 250, 16};  // vocab 250: the model pads it to 256 rows
  spec.shape.tie_embeddings = tied;
  spec.shape.attention_bias = arch == "qwen2";
  spec.shape.sliding_window = arch == "mistral" ? 5 : 0;
  spec.shape.own_head_dim = arch == "gemma" ? 16 : 0;  // q_proj (64, 32)
  return spec;
}

TEST(ModelFamilies, DescriptorsListEveryParameterTheModelDeclares) {
  ModelSpec gpt2;
  gpt2.shape = gpt2_shape(GPT2Config{3, 4, 32, 250, 16});
  std::vector<ModelSpec> specs = {gpt2};
  for (const ModelFamily* family : model_families())
    if (family->arch() != "gpt2")
      for (const bool tied : {false, true})
        if (tied || family->arch() != "gemma") specs.push_back(llama_like(std::string(family->arch()), tied));
  for (const ModelSpec& spec : specs) {
    SCOPED_TRACE(spec.arch + (spec.shape.tie_embeddings ? " tied" : ""));
    const Shapes model = declared(spec), family = described(spec);
    EXPECT_EQ(model, family);
    std::int64_t count = 0;
    for (const auto& [name, shape] : model) {
      std::int64_t elements = 1;
      for (const std::int64_t extent : shape) elements *= extent;
      count += elements;
    }
    EXPECT_EQ(spec.parameter_count(), count);
    EXPECT_EQ(spec.info().parameter_count, count);
  }
}

// GPT-2 small as OpenAI published it (124M: 124,439,808 with its 50257-token vocabulary and 1024
// positions), and LLaMA 7B as Meta's paper counts it (6,738,415,616).
TEST(ModelFamilies, CountsArePublishedOnes) {
  ModelSpec gpt2;
  gpt2.shape = gpt2_shape(GPT2Config{12, 12, 768, 50257, 1024});
  EXPECT_EQ(gpt2.parameter_count(), 124439808);
  ModelSpec llama;
  llama.arch = "llama";
  llama.shape = ModelShape{32, 32, 32, 4096, 11008, 32000, 2048};
  EXPECT_EQ(llama.parameter_count(), 6738415616);
  // Gemma 2B and 7B as Google published them (2,506,172,416 and 8,537,680,896): the 7B's 16 heads
  // are 256 wide over a d_model of 3072, so its q_proj is 4096 x 3072.
  ModelSpec gemma;
  gemma.arch = "gemma";
  gemma.shape = ModelShape{18, 8, 1, 2048, 16384, 256000, 8192};
  gemma.shape.own_head_dim = 256;
  gemma.shape.tie_embeddings = true;
  EXPECT_EQ(gemma.parameter_count(), 2506172416);
  gemma.shape = ModelShape{28, 16, 16, 3072, 24576, 256000, 8192};
  gemma.shape.own_head_dim = 256;
  gemma.shape.tie_embeddings = true;
  EXPECT_EQ(gemma.parameter_count(), 8537680896);
}

// What trains, in the words `strata ab` prints.
TEST(TrainablePlan, DescribedInAFewWords) {
  TrainablePlan plan;
  EXPECT_EQ(describe_training(plan, 4), "every parameter");
  plan.adapters = {{"q", nullptr}, {"v", nullptr}, {"q", nullptr}};
  plan.blocks.assign(4, BlockTraining::freeze);
  plan.embeddings = plan.head = false;
  EXPECT_EQ(describe_training(plan, 4), "adapters on q v (the base frozen)");
  TrainablePlan sparse;
  sparse.blocks = {BlockTraining::freeze, BlockTraining::skip, BlockTraining::train};
  sparse.embeddings = false;
  EXPECT_EQ(describe_training(sparse, 4), "1 of 4 blocks frozen, 1 of 4 blocks skipped, embeddings frozen");
}

// The backend's own attention takes a sliding window on both built-in backends (CUDA's softmax masks
// the keys before it), and still refuses packed documents by name.
TEST(ModelFamilies, BackendAttentionTakesAWindowOnEveryBackend) {
  const std::unique_ptr<Backend> device = make_cpu_backend(0);
  OpsAttentionKernel own(device->ops());
  const AttentionShape windowed{1, 16, 4, 2, 8, 5};
  KernelTarget cpu = device->kernel_target(), cuda = cpu;
  cuda.backend = "cuda:0";
  EXPECT_TRUE(own.check(windowed, cpu)) << own.check(windowed, cpu).message();
  EXPECT_TRUE(own.check(windowed, cuda)) << own.check(windowed, cuda).message();
  AttentionShape packed = windowed;
  packed.documents = true;
  const Status refused = own.check(packed, cuda);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("does not separate packed documents"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace strata
