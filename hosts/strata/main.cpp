// strata: train, eval, export, validate, plan, ab, verify, prepare, generate and plugins. Every error reaches the user
// as one clear message and an exit code (0 success, 1 the run failed, 2 invalid input).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/util/plugin_crash_report.hpp"
#include "exit_codes.hpp"

namespace {

constexpr const char* kUsage = R"(usage: strata <command> [options]

commands:
  train MANIFEST [--set key.path=value]... [--resume [DIR]] [--table] [--profile]
                         train a model as the manifest composes it
  eval MANIFEST --checkpoint PATH [--data FILE]
                         mean cross-entropy of a checkpoint; prints eval_loss=<value> last
  export MANIFEST --checkpoint PATH --merge OUT.safetensors
                         one Hugging Face file of the trained model, adapters (LoRA) folded in
  validate MANIFEST [--set ...]
                         check keys, plugins and compatibility without training; with a
                         memory_limit, warn when the predicted device peak exceeds it
  plan MANIFEST [--set ...] [--full] [--json] [--html FILE] [--calibration FILE]
       [--fit device=SIZE[,host=SIZE][,disk=SIZE] [--allow-numerics] [--write OUT.toml]]
                         print the tensor table as the strategies place it (every buffer, its
                         home, MiB per row, totals per category on the device and the host),
                         then the predicted peak of each home and, once calibrated, the step time;
                         --fit: the fastest stack that fits the budget (exit 1 when none does)
  calibrate [--out FILE] [--threads N] [--disk-path DIR]
                         time this machine's ops (and disk) for plan's step time
  ab A.toml B.toml [more.toml...] [--steps N] [--set ...]... [--html FILE] [--tolerance X] [--last-k N]
                         train each manifest in its own process and compare them: peak memory
                         by category, speed, losses, and a verdict against the first (identical,
                         within tolerance, diverged, optimizer comparison, not comparable)
  verify DIR             check a checkpoint directory offline: every save's checksums, finite
                         values and side files, and that `latest` names a sound save
  generate MANIFEST (--checkpoint DIR | --from HFDIR) --prompt TEXT [--max-new-tokens N]
           [--temperature T] [--top-k K] [--top-p P] [--seed S]
                         continue a prompt with a KV cache, streaming the text; prints the
                         prefill and decode speeds (tokens/s) at the end
  prepare --tokenizer DIR --out TRAIN.bin [--val-out VAL.bin] INPUT...
                         tokenize .txt and .jsonl text into token files (tokenizer.json or
                         tokenizer.model, as a Hugging Face model directory ships them)
  plugins [--verbose]    the plugins found, their interfaces and keys, and why any failed to load

`strata <command> --help` describes a command. Exit codes: 0 success, 1 the run failed
(memory budget exceeded, divergence, I/O error), 2 invalid input (manifest, data, plugin, checkpoint).
)";

// Runs the command named by argv[1]; returns its exit code.
int dispatch(const std::string& command, const std::vector<std::string>& arguments) {
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return strata::kExitSuccess;
  }
  if (command == "train") return strata::command_train(arguments);
  if (command == "eval") return strata::command_eval(arguments);
  if (command == "export") return strata::command_export(arguments);
  if (command == "validate") return strata::command_validate(arguments);
  if (command == "plan") return strata::command_plan(arguments);
  if (command == "plugins") return strata::command_plugins(arguments);
  if (command == "ab") return strata::command_ab(arguments);
  if (command == "verify") return strata::command_verify(arguments);
  if (command == "prepare") return strata::command_prepare(arguments);
  if (command == "generate") return strata::command_generate(arguments);
  if (command == "calibrate") return strata::command_calibrate(arguments);
  std::cerr << "strata: unknown command '" << command << "'\n\n" << kUsage;
  return strata::kExitInvalidInput;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return strata::kExitInvalidInput;
  }
  const std::string command = argv[1];
  const std::vector<std::string> arguments(argv + 2, argv + argc);
  // A closed stdout would hand descriptor 1 to the first file the command opens (a lock, a
  // checkpoint), and the output would go there: /dev/null takes its place, and the command fails.
  const bool stdout_closed = ::fcntl(STDOUT_FILENO, F_GETFD) == -1;
  if (stdout_closed) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0 && null != STDOUT_FILENO) {
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
  }
  strata::install_plugin_crash_report();  // a plugin that crashes is named on the way down
  const int code = dispatch(command, arguments);
  // Output that never arrived (stdout closed, a full disk) is a failed run, not a success: the
  // eval_loss line, a plan, a table. A run's checkpoints are written before this point.
  std::cout.flush();
  errno = 0;
  if (stdout_closed || std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    const int error = stdout_closed ? EBADF : errno;
    std::cerr << "strata " << command << ": writing to standard output failed"
              << (error != 0 ? std::string(" (") + std::strerror(error) + ")" : std::string()) << '\n';
    return code == strata::kExitSuccess ? strata::kExitRunFailed : code;
  }
  return code;
}
