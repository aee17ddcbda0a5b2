#include "cpu/fp16_matmul_cpu.hpp"

#include <cblas.h>

#include <algorithm>
#include <bit>

#include "strata/dtype.hpp"
#include "strata/kernels_common.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STRATA_FP16_F16C 1
#endif

namespace strata::fp16 {

namespace {

// Values per parallel conversion task: enough work to pay for handing it to a thread. Every value
// converts on its own, so the split changes no result.
constexpr std::int64_t kTaskValues = std::int64_t{1} << 14;

constexpr std::uint32_t kF32SignMask = 0x80000000u;
constexpr std::uint32_t kF32Infinity = 0x7f800000u;
constexpr std::uint32_t kF32QuietBit = 0x00400000u;
// The smallest f32 magnitude that rounds past the largest finite binary16, 65504: 65520.
constexpr std::uint32_t kF32FirstOverflow = 0x477ff000u;
// 2^-14, the smallest normal binary16, and 2^-25, half the smallest subnormal (it ties to zero).
constexpr std::uint32_t kF32SmallestNormalF16 = 0x38800000u;
constexpr std::uint32_t kF32HalfSmallestSubnormalF16 = 0x33000000u;
// f32 and binary16 exponent biases differ by 127 - 15; the significands by 23 - 10 bits.
constexpr std::uint32_t kExponentRebias = 112u;
constexpr int kDroppedBits = 13;

constexpr std::uint16_t kF16Infinity = 0x7c00u;
constexpr std::uint16_t kF16QuietNaN = 0x7e00u;

// The matrix as stored: in_out keeps input features as rows, out_in output features.
struct StoredShape {
  std::int64_t rows;
  std::int64_t row_length;
};

StoredShape stored_shape(const MatmulShape& shape) {
  return shape.layout == WeightLayout::in_out ? StoredShape{shape.in_features, shape.out_features}
                                              : StoredShape{shape.out_features, shape.in_features};
}

void narrow_scalar(std::uint16_t* out, const float* in, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = f32_to_f16(in[i]);
}

void widen_scalar(float* out, const std::uint16_t* in, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = f16_to_f32(in[i]);
}

void round_scalar(float* out, const float* in, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = f16_to_f32(f32_to_f16(in[i]));
}

#ifdef STRATA_FP16_F16C
// F16C converts as the scalar forms do: the rounding comes from the immediate (nearest even), not
// from MXCSR; binary16 subnormals are produced and read whatever MXCSR's FTZ and DAZ say, and an f32
// subnormal rounds to a signed zero either way; a NaN is quieted with its top payload bits.
__attribute__((target("avx2,f16c"))) void narrow_f16c(std::uint16_t* out, const float* in, std::int64_t count) {
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), halves);
  }
  narrow_scalar(out + i, in + i, count - i);
}

__attribute__((target("avx2,f16c"))) void widen_f16c(float* out, const std::uint16_t* in, std::int64_t count) {
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  widen_scalar(out + i, in + i, count - i);
}

__attribute__((target("avx2,f16c"))) void round_f16c(float* out, const float* in, std::int64_t count) {
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  round_scalar(out + i, in + i, count - i);
}

// Asked once; const afterwards. The target attribute lets the compiler use AVX2 too, so both.
bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
#endif

void narrow_task(std::uint16_t* out, const float* in, std::int64_t count, [[maybe_unused]] bool fast) {
#ifdef STRATA_FP16_F16C
  if (fast) {
    narrow_f16c(out, in, count);
    return;
  }
#endif
  narrow_scalar(out, in, count);
}

void widen_task(float* out, const std::uint16_t* in, std::int64_t count, [[maybe_unused]] bool fast) {
#ifdef STRATA_FP16_F16C
  if (fast) {
    widen_f16c(out, in, count);
    return;
  }
#endif
  widen_scalar(out, in, count);
}

void round_task(float* out, const float* in, std::int64_t count, [[maybe_unused]] bool fast) {
#ifdef STRATA_FP16_F16C
  if (fast) {
    round_f16c(out, in, count);
    return;
  }
#endif
  round_scalar(out, in, count);
}

bool use_f16c() {
#ifdef STRATA_FP16_F16C
  return cpu_has_f16c();
#else
  return false;
#endif
}

// C (m,n) = A (m,k) @ B (k,n) + beta * C, row-major, A and B each possibly transposed as stored.
// OpenBLAS's own threading splits the work by the thread count, which changes the last bits of a
// product; here the output is cut into tiles fixed by the shape alone, and OpenBLAS (the OpenMP
// build, which Strata requires), called inside an active OpenMP region, runs each tile on one thread. Tiles start at
// 256 x 256 and halve their larger side, down to 128, until there are 8 of them, so that a narrow product still
// spreads.
void gemm(CBLAS_TRANSPOSE transpose_a, CBLAS_TRANSPOSE transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  constexpr std::int64_t kLargestTile = 256, kSmallestTile = 128, kWantedTiles = 8;
  std::int64_t tile_rows = kLargestTile, tile_columns = kLargestTile;
  const auto tiles_across = [&] { return (n + tile_columns - 1) / tile_columns; };
  const auto tile_count = [&] { return (m + tile_rows - 1) / tile_rows * tiles_across(); };
  while (tile_count() < kWantedTiles && std::max(tile_rows, tile_columns) > kSmallestTile) {
    if (tile_rows >= tile_columns)
      tile_rows /= 2;
    else
      tile_columns /= 2;
  }
  const std::int64_t across = tiles_across(), count = tile_count();
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t tile = 0; tile < count; ++tile) {
    const std::int64_t row = tile / across * tile_rows, column = tile % across * tile_columns;
    const float* a_tile = transpose_a == CblasNoTrans ? a + row * lda : a + row;
    const float* b_tile = transpose_b == CblasNoTrans ? b + column : b + column * ldb;
    cblas_sgemm(CblasRowMajor, transpose_a, transpose_b, static_cast<int>(std::min(tile_rows, m - row)),
                static_cast<int>(std::min(tile_columns, n - column)), static_cast<int>(k), 1.0f, a_tile,
                static_cast<int>(lda), b_tile, static_cast<int>(ldb), beta, c + row * ldc + column,
                static_cast<int>(ldc));
  }
}

// How a call splits its work: `block_rows` rows of the operands per row block (rounded into the
// front of the scratch), `chunk_rows` stored rows of the weight per widened chunk (behind them).
struct Blocking {
  std::int64_t block_rows;
  std::int64_t chunk_rows;
  float* operands;
  float* weight_chunk;
};

// Forward: the weight gets at most half the scratch (all of it when it fits in that half, so it is
// widened once), at least one stored row; the rounded rows of inp get the rest.
Blocking forward_blocking(const MatmulShape& shape, StoredShape stored, float* scratch, std::int64_t scratch_elements) {
  const std::int64_t half_in_rows = scratch_elements / 2 / stored.row_length;
  const std::int64_t weight_region = std::clamp<std::int64_t>(half_in_rows, 1, stored.rows) * stored.row_length;
  const std::int64_t block_rows =
      std::clamp<std::int64_t>((scratch_elements - weight_region) / shape.in_features, 1, shape.rows);
  const std::int64_t operand_region = block_rows * shape.in_features;
  const std::int64_t chunk_rows =
      std::clamp<std::int64_t>((scratch_elements - operand_region) / stored.row_length, 1, stored.rows);
  return {block_rows, chunk_rows, scratch, scratch + operand_region};
}

// Backward: a row block's rounded dout stays at the front while the region behind it holds first
// its rounded inp (for dweight), then the weight chunks (for dinp). Rows of dout and inp together
// take at most the whole scratch, and the region behind always holds a stored row. Planned as if
// every output were asked for, so that each one is the same whichever others are.
Blocking backward_blocking(const MatmulShape& shape, StoredShape stored, float* scratch,
                           std::int64_t scratch_elements) {
  const std::int64_t fit_both = scratch_elements / (shape.out_features + shape.in_features);
  const std::int64_t fit_beside_a_row = (scratch_elements - stored.row_length) / shape.out_features;
  const std::int64_t block_rows = std::clamp<std::int64_t>(std::min(fit_both, fit_beside_a_row), 1, shape.rows);
  const std::int64_t dout_region = block_rows * shape.out_features;
  const std::int64_t chunk_rows =
      std::clamp<std::int64_t>((scratch_elements - dout_region) / stored.row_length, 1, stored.rows);
  return {block_rows, chunk_rows, scratch, scratch + dout_region};
}

}  // namespace

std::uint16_t f32_to_f16(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits & kF32SignMask) >> 16);
  const std::uint32_t magnitude = bits & ~kF32SignMask;
  if (magnitude > kF32Infinity)  // NaN: quieted, the top payload bits kept
    return static_cast<std::uint16_t>(sign | kF16QuietNaN | ((magnitude >> kDroppedBits) & 0x3ffu));
  if (magnitude >= kF32FirstOverflow) return static_cast<std::uint16_t>(sign | kF16Infinity);
  if (magnitude >= kF32SmallestNormalF16) {
    // Rebias the exponent, then drop 13 bits rounding to nearest even; a carry out of the
    // significand moves into the exponent, which is still the right encoding.
    const std::uint32_t rebiased = magnitude - (kExponentRebias << 23);
    const std::uint32_t rounded = rebiased + 0xfffu + ((rebiased >> kDroppedBits) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> kDroppedBits));
  }
  if (magnitude <= kF32HalfSmallestSubnormalF16) return sign;  // 2^-25 itself ties to the even zero
  // Subnormal: the value in units of 2^-24 is significand * 2^(exponent - 126), exponent 102..112,
  // rounded to an integer, nearest even. 1024 units (a carry) is the encoding of 2^-14.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;
  std::uint32_t units = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (remainder > half || (remainder == half && (units & 1u) != 0)) ++units;
  return static_cast<std::uint16_t>(sign | units);
}

float f16_to_f32(std::uint16_t value) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(value & 0x8000u) << 16;
  const std::uint32_t exponent = (value >> 10) & 0x1fu;
  const std::uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0x1fu) {  // infinity, or a NaN (quieted, payload kept)
    const std::uint32_t quiet = mantissa != 0 ? kF32QuietBit : 0u;
    return std::bit_cast<float>(sign | kF32Infinity | quiet | (mantissa << kDroppedBits));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa units of 2^-24, exact and normal in f32
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + kExponentRebias) << 23) | (mantissa << kDroppedBits));
}

void narrow(std::uint16_t* out, const float* in, std::int64_t count) {
  const bool fast = use_f16c();
#pragma omp parallel for schedule(static) if (count > kTaskValues)
  for (std::int64_t first = 0; first < count; first += kTaskValues)
    narrow_task(out + first, in + first, std::min(kTaskValues, count - first), fast);
}

void widen(float* out, const std::uint16_t* in, std::int64_t count) {
  const bool fast = use_f16c();
#pragma omp parallel for schedule(static) if (count > kTaskValues)
  for (std::int64_t first = 0; first < count; first += kTaskValues)
    widen_task(out + first, in + first, std::min(kTaskValues, count - first), fast);
}

void round_to_f16(float* out, const float* in, std::int64_t count) {
  const bool fast = use_f16c();
#pragma omp parallel for schedule(static) if (count > kTaskValues)
  for (std::int64_t first = 0; first < count; first += kTaskValues)
    round_task(out + first, in + first, std::min(kTaskValues, count - first), fast);
}

namespace {

// The activation operand as `operands` says: rounded to binary16 or to bf16, or copied as it is.
void round_operand(float* out, const float* in, std::int64_t count, Operands operands) {
  if (operands == Operands::f16) {
    round_to_f16(out, in, count);
    return;
  }
  const bool to_bf16 = operands == Operands::bf16;
#pragma omp parallel for schedule(static) if (count > kTaskValues)
  for (std::int64_t i = 0; i < count; ++i) out[i] = to_bf16 ? bf16_to_f32(f32_to_bf16(in[i])) : in[i];
}

}  // namespace

void matmul_forward(float* out, const float* inp, const std::uint16_t* weight, const float* bias,
                    const MatmulShape& shape, float* scratch, std::int64_t scratch_elements, Operands operands) {
  if (shape.rows == 0) return;
  const std::int64_t c = shape.in_features, oc = shape.out_features;
  const StoredShape stored = stored_shape(shape);
  const Blocking blocking = forward_blocking(shape, stored, scratch, scratch_elements);
  // A weight that fits whole is widened once, before the first row block.
  const bool weight_resident = blocking.chunk_rows == stored.rows;
  if (weight_resident) widen(blocking.weight_chunk, weight, stored.rows * stored.row_length);
  const auto chunk = [&](std::int64_t first_row, std::int64_t row_count) {
    if (!weight_resident)
      widen(blocking.weight_chunk, weight + first_row * stored.row_length, row_count * stored.row_length);
    return blocking.weight_chunk;
  };
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < shape.rows; ++row)
      std::copy(bias, bias + shape.out_features, out + row * shape.out_features);
  }
  for (std::int64_t r0 = 0; r0 < shape.rows; r0 += blocking.block_rows) {
    const std::int64_t rows = std::min(blocking.block_rows, shape.rows - r0);
    float* const inp16 = blocking.operands;
    round_operand(inp16, inp + r0 * shape.in_features, rows * shape.in_features, operands);
    float* const out_block = out + r0 * shape.out_features;
    if (shape.layout == WeightLayout::in_out) {
      // out (nb,OC) = sum over input chunks k of inp16[:, k] (nb,kc) @ W[k, :] (kc,OC)
      for (std::int64_t k0 = 0; k0 < shape.in_features; k0 += blocking.chunk_rows) {
        const std::int64_t kc = std::min(blocking.chunk_rows, shape.in_features - k0);
        const float beta = (k0 == 0 && bias == nullptr) ? 0.0f : 1.0f;
        gemm(CblasNoTrans, CblasNoTrans, rows, oc, kc, inp16 + k0, c, chunk(k0, kc), oc, beta, out_block, oc);
      }
    } else {
      // out[:, o] (nb,w) = inp16 (nb,C) @ W[o, :]^T (C,w): each chunk of output features its own columns
      const float beta = bias == nullptr ? 0.0f : 1.0f;
      for (std::int64_t o0 = 0; o0 < shape.out_features; o0 += blocking.chunk_rows) {
        const std::int64_t width = std::min(blocking.chunk_rows, shape.out_features - o0);
        gemm(CblasNoTrans, CblasTrans, rows, width, c, inp16, c, chunk(o0, width), c, beta, out_block + o0, oc);
      }
    }
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const std::uint16_t* weight, const MatmulShape& shape, float* scratch,
                     std::int64_t scratch_elements, GradientWrite dinp_write, Operands operands) {
  if (shape.rows == 0 || (dinp == nullptr && dweight == nullptr && dbias == nullptr)) return;
  const std::int64_t c = shape.in_features, oc = shape.out_features;
  const StoredShape stored = stored_shape(shape);
  const Blocking blocking = backward_blocking(shape, stored, scratch, scratch_elements);
  const float dinp_beta = dinp_write == GradientWrite::accumulate ? 1.0f : 0.0f;
  for (std::int64_t r0 = 0; r0 < shape.rows; r0 += blocking.block_rows) {
    const std::int64_t rows = std::min(blocking.block_rows, shape.rows - r0);
    float* const dout16 = blocking.operands;
    round_operand(dout16, dout + r0 * shape.out_features, rows * shape.out_features, operands);
    // A call per row block adds in the same order as one call over all rows.
    if (dbias != nullptr)
      kernels::bias_backward(dbias, dout16, rows, shape.out_features, rows * shape.out_features > kTaskValues);
    if (dweight != nullptr) {
      float* const inp16 = blocking.weight_chunk;
      round_operand(inp16, inp + r0 * shape.in_features, rows * shape.in_features, operands);
      if (shape.layout == WeightLayout::in_out) {
        // dW (C,OC) += inp16^T (C,nb) @ dout16 (nb,OC)
        gemm(CblasTrans, CblasNoTrans, c, oc, rows, inp16, c, dout16, oc, 1.0f, dweight, oc);
      } else {
        // dW (OC,C) += dout16^T (OC,nb) @ inp16 (nb,C)
        gemm(CblasTrans, CblasNoTrans, oc, c, rows, dout16, oc, inp16, c, 1.0f, dweight, c);
      }
    }
    if (dinp == nullptr) continue;
    float* const dinp_block = dinp + r0 * shape.in_features;
    float* const chunk = blocking.weight_chunk;
    if (shape.layout == WeightLayout::in_out) {
      // dinp[:, k] (nb,kc) (+)= dout16 (nb,OC) @ W[k, :]^T (OC,kc): each chunk writes its own columns
      for (std::int64_t k0 = 0; k0 < shape.in_features; k0 += blocking.chunk_rows) {
        const std::int64_t kc = std::min(blocking.chunk_rows, shape.in_features - k0);
        widen(chunk, weight + k0 * stored.row_length, kc * stored.row_length);
        gemm(CblasNoTrans, CblasTrans, rows, kc, oc, dout16, oc, chunk, oc, dinp_beta, dinp_block + k0, c);
      }
    } else {
      // dinp (nb,C) (+)= sum over output chunks o of dout16[:, o] (nb,w) @ W[o, :] (w,C)
      for (std::int64_t o0 = 0; o0 < shape.out_features; o0 += blocking.chunk_rows) {
        const std::int64_t width = std::min(blocking.chunk_rows, shape.out_features - o0);
        widen(chunk, weight + o0 * stored.row_length, width * stored.row_length);
        gemm(CblasNoTrans, CblasNoTrans, rows, c, width, dout16 + o0, oc, chunk, c, o0 == 0 ? dinp_beta : 1.0f,
             dinp_block, c);
      }
    }
  }
}

}  // namespace strata::fp16
