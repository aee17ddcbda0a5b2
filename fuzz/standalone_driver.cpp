// A main() for the fuzz targets without libFuzzer, so the normal build (GCC) runs them in CTest:
// every seed input, then --runs inputs made by stacking a few random mutations on a seed. The
// mutations come from a generator seeded with --seed, so a run repeats exactly: --trace prints
// each input's number before running it (the last one printed before a sanitizer report is the
// culprit) and --dump N writes input N to a file, to rerun alone or hand to a libFuzzer build.
//
//   fuzz_X [--runs N] [--seed S] [--trace] [--dump N FILE] SEED_FILE_OR_DIRECTORY...
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Input = std::vector<std::uint8_t>;

constexpr std::size_t kMaxInputBytes = 1 << 16;

struct Options {
  std::uint64_t runs = 0;
  std::uint64_t seed = 1;
  bool trace = false;
  std::optional<std::uint64_t> dump_index;
  std::filesystem::path dump_file;
  std::vector<std::filesystem::path> seeds;
};

Input read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  return Input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Seed files in a fixed order (directory listings are not), so input numbers mean the same every run.
std::vector<Input> read_seeds(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::filesystem::path> files;
  for (const std::filesystem::path& path : paths) {
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> listed;
      for (const auto& entry : std::filesystem::directory_iterator(path))
        if (entry.is_regular_file()) listed.push_back(entry.path());
      std::sort(listed.begin(), listed.end());
      files.insert(files.end(), listed.begin(), listed.end());
    } else {
      files.push_back(path);
    }
  }
  std::vector<Input> seeds;
  for (const std::filesystem::path& file : files) seeds.push_back(read_file(file));
  return seeds;
}

// Mutations in the spirit of libFuzzer's, without its coverage feedback: bit flips, byte values
// that delimit TOML and JSON, integers at the edges of the size fields, inserted, erased and
// duplicated runs, numbers swapped for extreme ones, and splices of two seeds.
class Mutator {
 public:
  Mutator(std::uint64_t seed, const std::vector<Input>& seeds) : random_(seed), seeds_(seeds) {}

  Input next() {
    Input input = seeds_.empty() ? Input{} : seeds_[below(seeds_.size())];
    const std::size_t count = 1 + below(5);
    for (std::size_t i = 0; i < count; ++i) mutate(input);
    if (input.size() > kMaxInputBytes) input.resize(kMaxInputBytes);
    return input;
  }

 private:
  std::size_t below(std::size_t bound) { return bound == 0 ? 0 : static_cast<std::size_t>(random_() % bound); }

  void mutate(Input& input) {
    static constexpr std::array<std::uint8_t, 20> kBytes = {0x00, 0xff, 0x7f, 0x80, '0', '1', '9', '-',  '.', '"',
                                                            '[',  ']',  '{',  '}',  '=', ',', ':', '\n', '#', 'e'};
    static constexpr std::array<std::uint64_t, 12> kIntegers = {0,
                                                                1,
                                                                0x7f,
                                                                0xffff,
                                                                0x10000,
                                                                0x7fffffff,
                                                                0x80000000,
                                                                0xffffffff,
                                                                0x100000000,
                                                                0x7fffffffffffffff,
                                                                0x8000000000000000,
                                                                0xffffffffffffffff};
    static constexpr std::array<std::string_view, 10> kNumbers = {"0",
                                                                  "-1",
                                                                  "4294967296",
                                                                  "9223372036854775807",
                                                                  "9223372036854775808",
                                                                  "-9223372036854775808",
                                                                  "1e309",
                                                                  "nan",
                                                                  "99999999999999999999",
                                                                  "0.000001"};
    switch (input.empty() ? 3 : below(9)) {
      case 0: input[below(input.size())] ^= static_cast<std::uint8_t>(1u << below(8)); break;
      case 1: input[below(input.size())] = static_cast<std::uint8_t>(random_()); break;
      case 2: input[below(input.size())] = kBytes[below(kBytes.size())]; break;
      case 3: {
        const std::size_t at = below(input.size() + 1);
        const std::size_t length = 1 + below(8);
        for (std::size_t i = 0; i < length; ++i)
          input.insert(input.begin() + static_cast<std::ptrdiff_t>(at),
                       below(2) ? kBytes[below(kBytes.size())] : static_cast<std::uint8_t>(random_()));
        break;
      }
      case 4: {
        const std::size_t at = below(input.size());
        const std::size_t length = std::min(1 + below(16), input.size() - at);
        input.erase(input.begin() + static_cast<std::ptrdiff_t>(at),
                    input.begin() + static_cast<std::ptrdiff_t>(at + length));
        break;
      }
      case 5: {
        const std::size_t from = below(input.size());
        const Input run(input.begin() + static_cast<std::ptrdiff_t>(from),
                        input.begin() + static_cast<std::ptrdiff_t>(std::min(input.size(), from + 1 + below(64))));
        input.insert(input.begin() + static_cast<std::ptrdiff_t>(below(input.size() + 1)), run.begin(), run.end());
        break;
      }
      case 6: {  // a little-endian integer of 4 or 8 bytes
        const std::size_t width = below(2) ? 8 : 4;
        if (input.size() < width) break;
        const std::uint64_t value = kIntegers[below(kIntegers.size())];
        const std::size_t at = below(input.size() - width + 1);
        for (std::size_t i = 0; i < width; ++i) input[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
        break;
      }
      case 7: {  // the run of digits at or after a random position becomes an extreme number
        std::size_t begin = below(input.size());
        while (begin < input.size() && (input[begin] < '0' || input[begin] > '9')) ++begin;
        std::size_t end = begin;
        while (end < input.size() && input[end] >= '0' && input[end] <= '9') ++end;
        const std::string_view number = kNumbers[below(kNumbers.size())];
        input.erase(input.begin() + static_cast<std::ptrdiff_t>(begin),
                    input.begin() + static_cast<std::ptrdiff_t>(end));
        input.insert(input.begin() + static_cast<std::ptrdiff_t>(begin), number.begin(), number.end());
        break;
      }
      default: {  // splice: this input's head, another seed's tail
        if (seeds_.empty()) break;
        const Input& other = seeds_[below(seeds_.size())];
        input.resize(below(input.size() + 1));
        input.insert(input.end(), other.begin() + static_cast<std::ptrdiff_t>(below(other.size() + 1)), other.end());
        break;
      }
    }
  }

  std::mt19937_64 random_;
  const std::vector<Input>& seeds_;
};

Options parse_options(int argc, char** argv) {
  Options options;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::runtime_error(args[i] + " needs a value");
      return args[++i];
    };
    if (args[i] == "--runs") {
      options.runs = std::stoull(value());
    } else if (args[i] == "--seed") {
      options.seed = std::stoull(value());
    } else if (args[i] == "--trace") {
      options.trace = true;
    } else if (args[i] == "--dump") {
      options.dump_index = std::stoull(value());
      options.dump_file = value();
    } else if (args[i].starts_with("--")) {
      throw std::runtime_error("unknown option " + args[i]);
    } else {
      options.seeds.emplace_back(args[i]);
    }
  }
  if (options.seeds.empty()) throw std::runtime_error("no seed files or directories given");
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::vector<Input> seeds;
  try {
    options = parse_options(argc, argv);
    seeds = read_seeds(options.seeds);
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\nusage: " << argv[0]
              << " [--runs N] [--seed S] [--trace] [--dump N FILE] SEED_FILE_OR_DIR...\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  Mutator mutator(options.seed, seeds);
  const std::uint64_t total = seeds.size() + options.runs;
  for (std::uint64_t index = 0; index < total; ++index) {
    const Input input = index < seeds.size() ? seeds[index] : mutator.next();
    if (options.dump_index == index) {
      std::ofstream(options.dump_file, std::ios::binary)
          .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
      std::cout << "wrote input " << index << " (" << input.size() << " bytes) to " << options.dump_file.string()
                << '\n';
      return 0;
    }
    if (options.dump_index) continue;
    if (options.trace) std::cerr << "input " << index << '\n';
    try {
      LLVMFuzzerTestOneInput(input.data(), input.size());
    } catch (const std::exception& e) {
      std::cerr << "FINDING: input " << index << " (seed " << options.seed << ") threw an unexpected "
                << "exception: " << e.what() << "\nrerun it alone: --dump " << index << " FILE\n";
      return 1;
    } catch (...) {
      std::cerr << "FINDING: input " << index << " (seed " << options.seed << ") threw a non-standard exception\n";
      return 1;
    }
  }
  if (options.dump_index) {
    std::cerr << argv[0] << ": --dump " << *options.dump_index << ": there are only " << total << " inputs\n";
    return 2;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "ran " << total << " inputs (" << seeds.size() << " seeds, " << options.runs << " mutations, seed "
            << options.seed << ") in " << seconds << " s without a finding\n";
  return 0;
}
