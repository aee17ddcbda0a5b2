// strata verify DIR: checks a checkpoint directory (or one save) offline, as a run checks each
// save before trusting it (core/checkpoint/checkpoint_verify.hpp).
#include <boost/program_options.hpp>
#include <iostream>

#include "command_line_style.hpp"
#include "commands.hpp"
#include "core/checkpoint/checkpoint_verify.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/util/format_bytes.hpp"
#include "exit_codes.hpp"

namespace strata {

int command_verify(const std::vector<std::string>& arguments) {
  namespace po = boost::program_options;
  std::string directory;
  po::options_description options("verify options");
  options.add_options()("help,h", "show this help")("dir", po::value(&directory)->required(),
                                                    "a checkpoint directory or one save's directory");
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(arguments).options(options).positional(positional).style(kCommandLineStyle).run(),
              values);
    if (values.count("help")) {
      std::cout << "usage: strata verify DIR\n\n" << options;
      return kExitSuccess;
    }
    po::notify(values);
  } catch (const po::error& e) {
    std::cerr << "strata verify: " << e.what() << "\nusage: strata verify DIR\n";
    return kExitInvalidInput;
  }
  try {
    const DirectoryVerdict verdict = verify_checkpoint_directory(directory);
    for (const SaveVerdict& save : verdict.saves) {
      if (save.fault.empty())
        std::cout << save.directory.string() << ": ok (step " << save.save.step << ", " << save.save.tensors
                  << " tensors, " << format_bytes(save.save.bytes) << ")\n";
      else
        std::cout << save.directory.string() << ": CORRUPT: " << save.fault << '\n';
    }
    if (!verdict.latest_fault.empty()) std::cout << "latest: " << verdict.latest_fault << '\n';
    if (verdict.ok()) return kExitSuccess;
    std::cerr << "strata verify: " << directory << ": corrupt checkpoint (see above)\n";
    return kExitInvalidInput;
  } catch (const CheckpointError& e) {
    std::cerr << "strata verify: " << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const std::exception& e) {
    std::cerr << "strata verify: " << directory << ": " << e.what() << '\n';
    return kExitInvalidInput;
  }
}

}  // namespace strata
