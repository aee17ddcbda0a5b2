// strata calibrate: times this machine's ops for the planner's step time (core/planner/calibration.hpp)
// and writes them where `strata plan` looks.
#include <boost/program_options.hpp>
#include <iostream>

#include "command_support.hpp"
#include "commands.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/planner/calibration.hpp"
#include "core/residency/disk_tier.hpp"
#include "exit_codes.hpp"

namespace strata {

int command_calibrate(const std::vector<std::string>& arguments) {
  namespace po = boost::program_options;
  po::options_description options("calibrate options");
  std::string out = default_calibration_path().string();
  int threads = 0;
  options.add_options()("out", po::value(&out), "where to write it (default: where `strata plan` looks)")(
      "threads", po::value(&threads), "threads to time the ops with (default 0: all cores, as train.threads = 0)")(
      "disk-path", po::value<std::string>(), "also time the disk tier's reads and writes in this directory");
  po::variables_map values;
  if (auto code = parse("calibrate", "[--out FILE] [--threads N] [--disk-path DIR]", options, arguments, values, false))
    return *code;
  return run_guarded("calibrate", [&] {
    if (threads < 0) throw ManifestError("--threads " + std::to_string(threads) + ": must be 0 (all cores) or more");
    std::optional<std::filesystem::path> disk;
    if (values.count("disk-path")) {
      disk = values["disk-path"].as<std::string>();
      if (const std::string problem = disk_directory_problem(*disk); !problem.empty())
        throw ManifestError("--disk-path " + disk->string() + ": " + problem);
    }
    check_output_file("--out", out);
    const Calibration calibration = measure_calibration(threads, disk, [](std::string_view what) {
      std::cout << "timing " << what << '\n' << std::flush;
    });
    save_calibration(calibration, out);
    std::cout << "wrote " << out << " (" << calibration.machine << ", " << calibration.threads << " threads, "
              << calibration.ops.size() << " ops" << (disk ? ", the disk" : "") << ")\n";
    return static_cast<int>(kExitSuccess);
  });
}

}  // namespace strata
