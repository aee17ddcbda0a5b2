#include "core/planner/calibration.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/residency/disk_tier.hpp"
#include "core/training/training_run.hpp"
#include "core/util/atomic_file.hpp"
#include "core/util/median.hpp"
#include "kernels/cpu/cpu_ops.hpp"
#include "strata/plugin_support/adamw_update.hpp"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// Overwrites more memory than the caches hold, so the next op finds its operands cold, as an op of
// a step does: the op before it worked on other buffers.
void evict_caches() {
  static std::vector<std::uint64_t> sweep((64u << 20) / sizeof(std::uint64_t));  // calibrate runs once per process
  for (std::size_t i = 0; i < sweep.size(); i += 8) sweep[i] += 1;
}

}  // namespace

double measure_seconds(const std::function<void()>& op, double at_least) {
  op();
  std::vector<double> times;
  double total = 0.0;
  do {
    evict_caches();
    const auto start = Clock::now();
    op();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    total += times.back();
  } while (times.size() < 3 || (total < at_least && times.size() < 25));
  return median(std::move(times));
}

namespace {

std::string machine_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(omp_get_num_procs()) + " cores";
}

std::string now_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &utc);
  return text;
}

// Buffers for one op's operands, filled with small values (the speed of these kernels does not
// depend on the values, but subnormals would).
struct Operands {
  explicit Operands(std::size_t floats)
      : a(floats, 0.01f), b(floats, 0.02f), c(floats, 0.0f), d(floats, 0.0f), e(floats, 0.0f), half(floats, 0x3c00) {}
  std::vector<float> a, b, c, d, e;
  std::vector<std::uint16_t> half;
};

void measure_products(Ops& ops, Calibration& calibration, const std::function<void(std::string_view)>& progress) {
  struct Shape {
    std::int64_t rows, in, out;
  };
  const Shape shapes[] = {{16, 32, 32},     {64, 64, 64},      {256, 256, 256},   {512, 512, 512},
                          {1024, 768, 768}, {2048, 768, 3072}, {2048, 2048, 2048}};
  for (const bool bf16 : {false, true}) {
    const std::string suffix = bf16 ? "_bf16" : "_f32";
    if (progress) progress("matmul" + suffix);
    for (const Shape& s : shapes) {
      const auto largest = static_cast<std::size_t>(std::max({s.rows * s.in, s.in * s.out, s.rows * s.out}));
      Operands x(largest);
      std::vector<float> scratch(static_cast<std::size_t>(std::min<std::int64_t>(s.in * s.out, 1 << 20)));
      const Weight weight = bf16 ? Weight{x.half.data(), DType::bf16, nullptr, 0} : Weight{x.b.data(), DType::f32};
      const MatmulShape shape{s.rows, s.in, s.out, WeightLayout::in_out};
      const Scratch room{scratch.data(), static_cast<std::int64_t>(scratch.size())};
      const double flops = 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.in) * static_cast<double>(s.out);
      calibration.ops["matmul_forward" + suffix].emplace_back(
          flops, measure_seconds([&] { ops.matmul_forward(x.c.data(), x.a.data(), weight, nullptr, shape, room); }));
      calibration.ops["matmul_backward" + suffix].emplace_back(
          2.0 * flops, measure_seconds([&] {
            ops.matmul_backward(x.d.data(), x.e.data(), nullptr, x.c.data(), x.a.data(), weight, shape, room,
                                GradientWrite::overwrite);
          }));
    }
  }
  if (progress) progress("attention");
  for (const int seq_len : {64, 256, 1024}) {
    const AttentionShape shape{1, seq_len, 4, 4, 64};
    const std::int64_t width = 4 * 64;
    Operands x(static_cast<std::size_t>(3 * seq_len * width));
    std::vector<float> saved(static_cast<std::size_t>(std::max<std::int64_t>(ops.attention_saved_floats(shape), 1)));
    std::vector<float> scratch(
        static_cast<std::size_t>(std::max<std::int64_t>(ops.attention_scratch_floats(shape), 1)));
    const AttentionInputs in{x.a.data(), x.a.data() + width, x.a.data() + 2 * width, 3 * width, 3 * width};
    const AttentionGrads grads{x.d.data(), x.d.data() + width, x.d.data() + 2 * width, 3 * width, 3 * width};
    const double flops = 2.0 * seq_len * 4.0 * seq_len * 64.0;
    calibration.ops["attention_forward"].emplace_back(
        flops, measure_seconds([&] { ops.attention_forward(shape, x.c.data(), saved.data(), in); }));
    calibration.ops["attention_backward"].emplace_back(
        flops,
        measure_seconds([&] { ops.attention_backward(shape, grads, x.b.data(), in, saved.data(), scratch.data()); }));
  }
}

// The ops priced per element (or byte), each at four sizes.
void measure_passes(Ops& ops, Calibration& calibration, const std::function<void(std::string_view)>& progress) {
  constexpr std::int64_t kChannels = 256;
  // From a few rows, where an op's fixed cost (threads woken, a pass begun) is most of it, to more
  // than the caches hold.
  for (const std::int64_t count :
       {std::int64_t{1} << 10, std::int64_t{1} << 14, std::int64_t{1} << 18, std::int64_t{1} << 22}) {
    if (progress) progress("passes over " + std::to_string(count) + " elements");
    Operands x(static_cast<std::size_t>(2 * count));
    const std::int64_t rows = count / kChannels;
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows), 1);
    float* a = x.a.data();
    float* b = x.b.data();
    float* c = x.c.data();
    float* d = x.d.data();
    float* e = x.e.data();
    const auto add = [&](const char* name, double work, const std::function<void()>& op) {
      calibration.ops[name].emplace_back(work, measure_seconds(op));
    };
    const auto n = static_cast<double>(count);
    add("layernorm_forward", n, [&] { ops.layernorm_forward(c, d, e, a, b, b, rows, kChannels, 1e-5f); });
    add("layernorm_backward", n, [&] { ops.layernorm_backward(c, d, e, a, a, b, d, e, rows, kChannels); });
    add("rmsnorm_forward", n, [&] { ops.rmsnorm_forward(c, e, a, b, rows, kChannels, 1e-5f); });
    add("rmsnorm_backward", n, [&] { ops.rmsnorm_backward(c, d, a, a, b, e, rows, kChannels); });
    add("gelu_forward", n, [&] { ops.gelu_forward(c, a, count); });
    add("gelu_backward", n, [&] { ops.gelu_backward(c, a, b, count, GradientWrite::overwrite); });
    add("swiglu_forward", n, [&] { ops.swiglu_forward(c, a, b, count); });
    add("swiglu_backward", n, [&] { ops.swiglu_backward(c, d, a, a, b, count, GradientWrite::overwrite); });
    add("rope_forward", n, [&] { ops.rope(c, rows, kChannels, static_cast<int>(rows), 4, 64, 10000.0f, false); });
    add("rope_backward", n, [&] { ops.rope(c, rows, kChannels, static_cast<int>(rows), 4, 64, 10000.0f, true); });
    add("residual_forward", n, [&] { ops.residual_forward(c, a, b, count); });
    const Weight table{b, DType::f32};
    add("embedding_forward", n, [&] { ops.embedding_forward(c, tokens.data(), table, Weight{}, 1, rows, kChannels); });
    add("embedding_backward", n, [&] { ops.embedding_backward(c, nullptr, a, tokens.data(), 1, rows, kChannels); });
    add("cross_entropy_forward", n,
        [&] { ops.cross_entropy_forward_chunk(c, d, e, a, tokens.data(), rows, 0, kChannels, kChannels); });
    add("cross_entropy_backward", n,
        [&] { ops.cross_entropy_backward_chunk(c, a, b, tokens.data(), 1.0f, rows, 0, kChannels, kChannels); });
    add("cross_entropy_finish", static_cast<double>(rows),
        [&] { ops.cross_entropy_finish(c, d, a, b, e, tokens.data(), rows); });
    // The optimizers' updates are their plugins' host code (Ops::host_kernel, priced by name): AdamW's
    // loop is the SDK's (strata/plugin_support/adamw_update.hpp), SGD's a momentum pass like sgd's.
    add("adamw_update", n, [&] { plugin_support::adamw_update_f32(c, a, d, e, count, AdamWHyper{}); });
    add("sgd_update", n, [&] {
#pragma omp parallel for simd schedule(static)
      for (std::int64_t i = 0; i < count; ++i) {
        d[i] = 0.9f * d[i] + a[i];
        c[i] = c[i] - 0.01f * d[i];
      }
    });
    add("widen", n, [&] { ops.widen(c, x.half.data(), count); });
    add("narrow", n, [&] { ops.narrow(x.half.data(), a, count); });
    add("sum_of_squares", n, [&] { (void)ops.sum_of_squares(a, count); });
    add("all_finite", n, [&] { (void)ops.all_finite(a, count); });
    add("sum", n, [&] { (void)ops.sum(a, count); });
    add("scale", n, [&] { ops.scale(c, 0.5f, count); });
    add("add_scaled", n, [&] { ops.add_scaled(c, 0.5f, a, count); });
    const auto bytes = static_cast<std::uint64_t>(count) * sizeof(float);
    add("fill", static_cast<double>(bytes), [&] { ops.fill(c, 0, bytes); });
    add("copy", static_cast<double>(bytes), [&] { ops.copy(c, a, bytes); });
  }
}

void measure_disk(const std::filesystem::path& directory, Calibration& calibration) {
  DiskTierOptions options;
  options.directory = directory;
  DiskTier tier(std::move(options));
  constexpr std::uint64_t kBytes = 256ull << 20;
  std::vector<std::byte> buffer(kBytes, std::byte{1});
  const std::uint64_t offset = tier.reserve(kBytes, "calibration");
  const auto start = Clock::now();
  tier.wait(tier.write(offset, buffer.data(), kBytes));
  calibration.disk_write_bytes_per_second =
      static_cast<double>(kBytes) / std::chrono::duration<double>(Clock::now() - start).count();
  const auto read_start = Clock::now();
  tier.wait(tier.read(offset, buffer.data(), kBytes));
  calibration.disk_read_bytes_per_second =
      static_cast<double>(kBytes) / std::chrono::duration<double>(Clock::now() - read_start).count();
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path.string() + ": cannot read the calibration (run `strata calibrate`)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

double Calibration::seconds(std::string_view op, double work) const {
  if (work <= 0.0) return 0.0;
  auto found = ops.find(std::string(op));
  if (found == ops.end() || found->second.empty()) found = ops.find("scale");
  if (found == ops.end() || found->second.empty()) return 0.0;
  const auto& points = found->second;
  const auto rate = [](const std::pair<double, double>& point) { return point.first / std::max(point.second, 1e-12); };
  if (work <= points.front().first) return work / rate(points.front());
  if (work >= points.back().first) return work / rate(points.back());
  std::size_t upper = 1;
  while (points[upper].first < work) ++upper;
  const auto& low = points[upper - 1];
  const auto& high = points[upper];
  const double t = (std::log(work) - std::log(low.first)) / (std::log(high.first) - std::log(low.first));
  return work / std::exp(std::log(rate(low)) + t * (std::log(rate(high)) - std::log(rate(low))));
}

std::filesystem::path default_calibration_path() {
  if (const char* given = std::getenv("STRATA_CALIBRATION"); given != nullptr && *given != '\0') return given;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0')
    return std::filesystem::path(cache) / "strata" / "calibration.json";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "strata" / "calibration.json";
}

Calibration measure_calibration(int threads, const std::optional<std::filesystem::path>& disk_directory,
                                const std::function<void(std::string_view)>& progress) {
  configure_threads(threads);
  Calibration calibration;
  calibration.machine = machine_name();
  calibration.measured_at = now_utc();
  calibration.threads = omp_get_max_threads();
  const std::unique_ptr<Ops> ops = cpu::make_cpu_ops();
  measure_products(*ops, calibration, progress);
  measure_passes(*ops, calibration, progress);
  if (disk_directory) {
    if (progress) progress("the disk in " + disk_directory->string());
    measure_disk(*disk_directory, calibration);
  }
  return calibration;
}

void save_calibration(const Calibration& calibration, const std::filesystem::path& path) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, points] : calibration.ops) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [work, seconds] : points) list.push_back({work, seconds});
    ops[name] = list;
  }
  const nlohmann::json json{{"machine", calibration.machine},
                            {"measured_at", calibration.measured_at},
                            {"threads", calibration.threads},
                            {"disk_read_bytes_per_second", calibration.disk_read_bytes_per_second},
                            {"disk_write_bytes_per_second", calibration.disk_write_bytes_per_second},
                            {"ops", ops}};
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  write_file_atomically(path, json.dump(1) + "\n");
}

Calibration load_calibration(const std::filesystem::path& path) {
  Calibration calibration;
  try {
    const nlohmann::json json = nlohmann::json::parse(read_text(path));
    calibration.machine = json.at("machine").get<std::string>();
    calibration.measured_at = json.at("measured_at").get<std::string>();
    calibration.threads = json.at("threads").get<int>();
    calibration.disk_read_bytes_per_second = json.at("disk_read_bytes_per_second").get<double>();
    calibration.disk_write_bytes_per_second = json.at("disk_write_bytes_per_second").get<double>();
    for (const auto& [name, points] : json.at("ops").items()) {
      auto& list = calibration.ops[name];
      for (const auto& point : points) {
        const double work = point.at(0).get<double>();
        const double seconds = point.at(1).get<double>();
        // A measured op never takes 0 s: a time of 0 would price the step at nothing.
        if (!(work > 0.0) || !(seconds > 0.0) || !std::isfinite(work) || !std::isfinite(seconds))
          throw std::invalid_argument(path.string() + ": op '" + name + "' has a point of work " +
                                      std::to_string(work) + " in " + std::to_string(seconds) +
                                      " s: sizes and times must be positive and finite (run `strata calibrate` again)");
        list.emplace_back(work, seconds);
      }
      std::sort(list.begin(), list.end());
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path.string() + ": not a calibration Strata wrote (" + e.what() +
                                "): run `strata calibrate` again");
  }
  calibration.path = path;
  return calibration;
}

}  // namespace strata
