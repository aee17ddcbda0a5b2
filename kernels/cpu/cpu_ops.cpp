#include "kernels/cpu/cpu_ops.hpp"

#include <cmath>
#include <cstring>

#include "kernels/cpu/attention_kernels.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/decode.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/geglu.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear_algebra.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/reductions.hpp"
#include "kernels/cpu/residual.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/scale.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace strata::cpu {

namespace {

const std::uint16_t* bf16_data(Weight weight) {
  return static_cast<const std::uint16_t*>(weight.data);
}
const float* f32_data(Weight weight) {
  return static_cast<const float*>(weight.data);
}

void matmul_forward_record(const op::MatmulForward& r) {
  const MatmulShape& s = r.shape;
  if (r.weight.dtype == DType::bf16)
    matmul_forward_bf16(r.out, r.inp, bf16_data(r.weight), r.bias, s.rows, s.in_features, s.out_features, s.layout,
                        r.scratch.data, r.scratch.elements);
  else
    cpu::matmul_forward(r.out, r.inp, f32_data(r.weight), r.bias, s.rows, s.in_features, s.out_features, s.layout);
}

void matmul_backward_record(const op::MatmulBackward& r) {
  const MatmulShape& s = r.shape;
  if (r.weight.dtype == DType::bf16)
    matmul_backward_bf16(r.dinp, r.dweight, r.dbias, r.dout, r.inp, bf16_data(r.weight), s.rows, s.in_features,
                         s.out_features, s.layout, r.scratch.data, r.scratch.elements, r.dinp_write);
  else
    cpu::matmul_backward(r.dinp, r.dweight, r.dbias, r.dout, r.inp, f32_data(r.weight), s.rows, s.in_features,
                         s.out_features, s.layout, r.dinp_write);
}

// One rotation kernel for training, decoding and scaled frequencies: theta's frequencies computed
// in f32 as Hugging Face computes them, or the given ones.
void rope_record(const op::Rope& r) {
  std::vector<float> from_theta;
  const float* frequencies = r.inverse_frequencies;
  if (frequencies == nullptr) {
    from_theta = rope_inverse_frequencies(r.theta, r.head_dim);
    frequencies = from_theta.data();
  }
  if (r.positions != nullptr)
    rope_positions(r.x, r.rows, r.stride, r.positions, r.n_heads, r.head_dim, frequencies, r.inverse);
  else
    rope_frequencies(r.x, r.rows, r.stride, r.seq_len, r.first_position, r.n_heads, r.head_dim, frequencies, r.inverse);
}

void embedding_forward_record(const op::EmbeddingForward& r) {
  if (r.wte.dtype == DType::bf16)
    embedding_forward_bf16(r.out, r.tokens, bf16_data(r.wte), bf16_data(r.wpe), r.batch, r.seq_len, r.channels,
                           r.positions, r.scale);
  else
    cpu::embedding_forward(r.out, r.tokens, f32_data(r.wte), f32_data(r.wpe), r.batch, r.seq_len, r.channels,
                           r.positions, r.scale);
}

class CpuOps final : public Ops {
 public:
  CpuOps() : attention_(make_attention_kernel(AttentionImpl::fast)) {}

  std::string_view backend() const noexcept override { return "cpu"; }
  // Not the bf16-input matmuls: the CPU's bf16 products compute in f32, on the input the caller widened.
  bool supports(Op op) const noexcept override {
    return op < Op::count && op != Op::matmul_forward_bf16_input && op != Op::matmul_backward_bf16_input;
  }

  void run(Op id, void* record) noexcept override {
    switch (id) {
      case Op::matmul_forward: return matmul_forward_record(record_of<op::MatmulForward>(record));
      case Op::matmul_backward: return matmul_backward_record(record_of<op::MatmulBackward>(record));
      case Op::gemm: return cpu::gemm(record_of<op::Gemm>(record));
      case Op::layernorm_forward: {
        const auto& r = record_of<op::LayernormForward>(record);
        return cpu::layernorm_forward(r.out, r.mean, r.rstd, r.inp, r.weight, r.bias, r.rows, r.channels, r.eps);
      }
      case Op::layernorm_backward: {
        const auto& r = record_of<op::LayernormBackward>(record);
        return cpu::layernorm_backward(r.dinp, r.dweight, r.dbias, r.dout, r.inp, r.weight, r.mean, r.rstd, r.rows,
                                       r.channels);
      }
      case Op::rmsnorm_forward: {
        const auto& r = record_of<op::RmsnormForward>(record);
        return cpu::rmsnorm_forward(r.out, r.rstd, r.inp, r.weight, r.rows, r.channels, r.eps, r.weight_offset);
      }
      case Op::rmsnorm_backward: {
        const auto& r = record_of<op::RmsnormBackward>(record);
        return cpu::rmsnorm_backward(r.dinp, r.dweight, r.dout, r.inp, r.weight, r.rstd, r.rows, r.channels,
                                     r.weight_offset);
      }
      // The fast attention kernel, which `[kernels] attention = "fast"` also selects.
      case Op::attention_sizes: {
        auto& r = record_of<op::AttentionSizes>(record);
        r.saved_floats = attention_->saved_floats(r.shape);
        r.scratch_floats = attention_->backward_scratch_floats(r.shape);
        return;
      }
      case Op::attention_forward: {  // the CPU kernels cannot fail
        const auto& r = record_of<op::AttentionForward>(record);
        (void)attention_->attention_forward(KernelCall{}, r.shape, r.out, r.saved, r.in);
        return;
      }
      case Op::attention_backward: {  // reads no output
        const auto& r = record_of<op::AttentionBackward>(record);
        (void)attention_->attention_backward(KernelCall{}, r.shape, r.grads, r.dout, nullptr, r.in, r.saved, r.scratch);
        return;
      }
      case Op::attention_decode: {
        const auto& r = record_of<op::AttentionDecode>(record);
        return cpu::attention_decode(r.shape, r.out, r.in, r.k_cache, r.v_cache);
      }
      case Op::gelu_forward: {
        const auto& r = record_of<op::GeluForward>(record);
        return cpu::gelu_forward(r.out, r.inp, r.count);
      }
      case Op::gelu_backward: {
        const auto& r = record_of<op::GeluBackward>(record);
        return cpu::gelu_backward(r.dinp, r.inp, r.dout, r.count, r.write);
      }
      case Op::swiglu_forward: {
        const auto& r = record_of<op::SwigluForward>(record);
        return cpu::swiglu_forward(r.out, r.gate, r.up, r.count);
      }
      case Op::swiglu_backward: {
        const auto& r = record_of<op::SwigluBackward>(record);
        return cpu::swiglu_backward(r.dgate, r.dup, r.dout, r.gate, r.up, r.count, r.write);
      }
      case Op::geglu_forward: {
        const auto& r = record_of<op::GegluForward>(record);
        return cpu::geglu_forward(r.out, r.gate, r.up, r.count);
      }
      case Op::geglu_backward: {
        const auto& r = record_of<op::GegluBackward>(record);
        return cpu::geglu_backward(r.dgate, r.dup, r.dout, r.gate, r.up, r.count, r.write);
      }
      case Op::rope: return rope_record(record_of<op::Rope>(record));
      case Op::residual_forward: {
        const auto& r = record_of<op::ResidualForward>(record);
        return cpu::residual_forward(r.out, r.a, r.b, r.count);
      }
      case Op::embedding_forward: return embedding_forward_record(record_of<op::EmbeddingForward>(record));
      case Op::embedding_backward: {
        const auto& r = record_of<op::EmbeddingBackward>(record);
        return cpu::embedding_backward(r.dwte, r.dwpe, r.dout, r.tokens, r.batch, r.seq_len, r.channels, r.positions,
                                       r.scale);
      }
      case Op::cross_entropy_forward_chunk: {
        const auto& r = record_of<op::CrossEntropyForwardChunk>(record);
        return cpu::cross_entropy_forward_chunk(r.running_max, r.running_sum, r.target_logits, r.logits, r.targets,
                                                r.rows, r.first, r.width, r.vocab);
      }
      case Op::cross_entropy_finish: {
        const auto& r = record_of<op::CrossEntropyFinish>(record);
        return cpu::cross_entropy_finish(r.losses, r.logsumexp, r.running_max, r.running_sum, r.target_logits,
                                         r.targets, r.rows);
      }
      case Op::cross_entropy_backward_chunk: {
        const auto& r = record_of<op::CrossEntropyBackwardChunk>(record);
        return cpu::cross_entropy_backward_chunk(r.dlogits, r.logits, r.logsumexp, r.targets, r.dloss, r.rows, r.first,
                                                 r.width, r.vocab);
      }
      case Op::host_kernel: {  // the "device" memory is host memory
        const auto& r = record_of<op::HostKernel>(record);
        return r.run(r.context);
      }
      case Op::widen: {
        const auto& r = record_of<op::Widen>(record);
        return cpu::widen(r.out, r.in, r.count);
      }
      case Op::narrow: {
        const auto& r = record_of<op::Narrow>(record);
        return cpu::narrow(r.out, r.in, r.count);
      }
      case Op::narrow_and_round: {
        const auto& r = record_of<op::NarrowAndRound>(record);
        return cpu::narrow_and_round(r.out, r.in, r.count);
      }
      case Op::sum_of_squares: {
        auto& r = record_of<op::SumOfSquares>(record);
        r.result = cpu::sum_of_squares(r.values, r.count);
        return;
      }
      case Op::all_finite: {
        auto& r = record_of<op::AllFinite>(record);
        r.result = cpu::all_finite(r.values, r.count);
        return;
      }
      case Op::sum: {
        auto& r = record_of<op::Sum>(record);
        r.result = cpu::sum(r.values, r.count);
        return;
      }
      case Op::scale: {
        const auto& r = record_of<op::Scale>(record);
        return cpu::scale(r.values, r.factor, r.count);
      }
      case Op::add_scaled: {
        const auto& r = record_of<op::AddScaled>(record);
        return cpu::add_scaled(r.y, r.alpha, r.x, r.count);
      }
      case Op::sign: {
        const auto& r = record_of<op::Sign>(record);
        return cpu::sign(r.out, r.x, r.count);
      }
      case Op::mul: {
        const auto& r = record_of<op::Mul>(record);
        return cpu::mul(r.out, r.a, r.b, r.count);
      }
      case Op::div: {
        const auto& r = record_of<op::Div>(record);
        return cpu::div(r.out, r.a, r.b, r.eps, r.count);
      }
      case Op::sqrt: {
        const auto& r = record_of<op::Sqrt>(record);
        return cpu::sqrt(r.out, r.x, r.count);
      }
      // CPU "device" memory is host memory: fills and copies are memset and memcpy.
      case Op::fill: {
        const auto& r = record_of<op::Fill>(record);
        std::memset(r.data, r.byte, r.bytes);
        return;
      }
      case Op::copy: {
        const auto& r = record_of<op::Copy>(record);
        std::memcpy(r.destination, r.source, r.bytes);
        return;
      }
      case Op::copy_to_host: {
        const auto& r = record_of<op::CopyToHost>(record);
        std::memcpy(r.host_destination, r.source, r.bytes);
        return;
      }
      case Op::copy_from_host: {
        const auto& r = record_of<op::CopyFromHost>(record);
        std::memcpy(r.destination, r.host_source, r.bytes);
        return;
      }
      case Op::qr: {
        const auto& r = record_of<op::Qr>(record);
        return cpu::qr(r.a, r.r, r.rows, r.cols);
      }
      case Op::eigh: {
        const auto& r = record_of<op::Eigh>(record);
        return cpu::eigh(r.a, r.values, r.n);
      }
      case Op::matmul_forward_bf16_input:
      case Op::matmul_backward_bf16_input:
      case Op::count: break;
    }
    unsupported(id);
  }

 private:
  std::unique_ptr<Kernel> attention_;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() {
  return std::make_unique<CpuOps>();
}

}  // namespace strata::cpu
