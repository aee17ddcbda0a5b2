#pragma once
// A machine's calibration for the planner's step time (docs/architecture.md, "The planner"):
// `strata calibrate` times each op of the CPU op table at a few sizes, a host copy, and (when
// given a directory) the disk, and writes them to a file `strata plan` reads. The plan prices each
// op its dry run logged by interpolating between the measured sizes.
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata {

struct Calibration {
  std::string machine;      // "AMD EPYC 7B13, 2 cores"
  std::string measured_at;  // "2026-11-27 10:58 UTC"
  int threads = 0;
  // Per op name (as the dry run logs them: "matmul_forward_f32", "layernorm_backward", "copy"),
  // the seconds measured at each work size (flops, elements or bytes), ascending in work.
  std::map<std::string, std::vector<std::pair<double, double>>> ops;
  double disk_read_bytes_per_second = 0.0;  // 0: not measured
  double disk_write_bytes_per_second = 0.0;
  std::filesystem::path path;  // where it was read from

  // The seconds `op` takes for `work`: between two measured sizes, the rate is interpolated in log
  // space; past the ends, the nearest size's rate. An op never measured is priced as a pass over
  // memory ("scale").
  double seconds(std::string_view op, double work) const;
};

// The median seconds of a few runs of `op` (at least three, and `at_least` seconds of them, at most
// 25) after a warm-up, each from cold caches: how the calibration times an op, and how the planner
// times a plugin's own kernel on the spot.
double measure_seconds(const std::function<void()>& op, double at_least = 0.2);

// A plugin kernel's times measured on the spot (core/planner/dry_plugins.hpp), kept across the dry
// runs of one `plan --fit` search: a kernel and shape is timed once. Keyed by the kernel's identity
// (its plugin table), what it computes and the shape.
using KernelTimings = std::map<std::string, double>;

// $STRATA_CALIBRATION, else $XDG_CACHE_HOME/strata/calibration.json, else
// ~/.cache/strata/calibration.json.
std::filesystem::path default_calibration_path();

// Measures this machine with `threads` threads (0: all cores); `disk_directory` also times the disk
// tier's reads and writes there. `progress` hears each op's name as it is timed.
Calibration measure_calibration(int threads, const std::optional<std::filesystem::path>& disk_directory,
                                const std::function<void(std::string_view)>& progress = {});

// Written atomically as JSON. Reading throws std::invalid_argument naming the file and what is wrong.
void save_calibration(const Calibration& calibration, const std::filesystem::path& path);
Calibration load_calibration(const std::filesystem::path& path);

}  // namespace strata
