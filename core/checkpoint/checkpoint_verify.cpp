#include "core/checkpoint/checkpoint_verify.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_directory.hpp"
#include "core/checkpoint/safetensors.hpp"

namespace strata {

namespace fs = std::filesystem;

std::string read_save_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path.string() + ": missing or unreadable");
  // One read of the known size: a byte-wise iterator over a gigabyte costs seconds.
  std::error_code error;
  std::string bytes(static_cast<std::size_t>(fs::file_size(path, error)), '\0');
  if (error || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw CheckpointError(path.string() + ": unreadable");
  return bytes;
}

namespace {

// Reads a safetensors file once (its checksums verified as it parses), records its whole-file
// checksum and checks that its floating tensors hold finite values; returns how many tensors it holds.
std::int64_t verify_tensors(const fs::path& path, std::string& file_checksum, bool mapped) {
  // Mapped, a tensor's pages are handed back once checked: the read-back of a save holds one
  // tensor's pages, not the file's.
  const SafetensorsFile file = mapped ? SafetensorsFile::map(path, &file_checksum, SafetensorsFile::Paging::on_demand)
                                      : SafetensorsFile::read(path, &file_checksum);
  for (const auto& [name, entry] : file.entries()) {
    if (const auto bad = file.first_non_finite(name))
      throw CheckpointError(path.string() + ": corrupt checkpoint: tensor '" + name + "' holds " +
                            std::to_string(bad->value) + " at element " + std::to_string(bad->index));
    file.release(name);
  }
  return static_cast<std::int64_t>(file.entries().size());
}

// The tier_files object of a format-3 save (empty for the others).
const nlohmann::json& tier_files_of(const nlohmann::json& trainer) {
  static const nlohmann::json none = nlohmann::json::object();
  return trainer.contains("tier_files") ? trainer["tier_files"] : none;
}

// The save's tier/ folder itself, not a link to somewhere else: a save's files stay inside it.
void require_tier_folder(const fs::path& step_directory) {
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(step_directory / kTierDirectory, error)))
    throw CheckpointError((step_directory / kTierDirectory).string() +
                          ": missing or not a directory: trainer.json lists files in it (the save is incomplete or "
                          "altered)");
}

}  // namespace

namespace {

// The path of a linked file trainer.json names, "tier/NAME" and nothing else: a save's files stay
// inside it. Throws CheckpointError.
fs::path tier_file_path(const fs::path& step_directory, const nlohmann::json& entry) {
  const std::string trainer_path = (step_directory / "trainer.json").string();
  const std::string prefix = std::string(kTierDirectory) + "/";
  const std::string file = entry.is_object() && entry.contains("file") && entry["file"].is_string()
                               ? entry["file"].get<std::string>()
                               : std::string();
  const std::string name = file.starts_with(prefix) ? file.substr(prefix.size()) : std::string();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    throw CheckpointError(trainer_path + ": corrupt: tier_files lists '" + file + "', which is not a file of the save");
  return step_directory / kTierDirectory / name;
}

}  // namespace

std::vector<SafetensorsFile> tier_tensors(const fs::path& step_directory, const nlohmann::json& trainer,
                                          const std::string& file, bool check) {
  const std::string trainer_path = (step_directory / "trainer.json").string();
  std::vector<SafetensorsFile> tensors;
  const nlohmann::json& listed = tier_files_of(trainer);
  if (!listed.is_object()) throw CheckpointError(trainer_path + ": corrupt: tier_files is not an object");
  if (listed.empty()) return tensors;
  // Saves of the formats before linked files cannot hold them; one from a newer Strata is left to
  // check_save_files, which names it so.
  const nlohmann::json* format = trainer.contains("format") ? &trainer["format"] : nullptr;
  if (format != nullptr && format->is_string() && (*format == kCheckpointFormat || *format == "strata-checkpoint-1"))
    throw CheckpointError(trainer_path + ": corrupt: tier_files in a save of format " + format->get<std::string>());
  require_tier_folder(step_directory);
  try {
    for (const auto& [name, entry] : listed.items()) {
      const std::string in = entry.at("in").get<std::string>();
      if (in != "model.safetensors" && in != "optimizer.safetensors")
        throw CheckpointError(trainer_path + ": corrupt: tier_files puts '" + name + "' in '" + in + "'");
      if (in != file) continue;
      tensors.push_back(SafetensorsFile::map_raw(
          tier_file_path(step_directory, entry),
          {name, entry.at("dtype").get<std::string>(), entry.at("shape").get<std::vector<std::int64_t>>(),
           entry.at("bytes").get<std::uint64_t>(), entry.at("checksum").get<std::string>()},
          check));
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(trainer_path + ": corrupt tier_files: " + e.what());
  }
  return tensors;
}

void check_save_files(const fs::path& step_directory, const nlohmann::json& trainer,
                      const std::map<std::string, std::string>& read_checksums) {
  const std::string trainer_path = (step_directory / "trainer.json").string();
  const std::string format = trainer.contains("format") && trainer["format"].is_string() ? trainer["format"] : "";
  if (format != kCheckpointFormat && format != kTierCheckpointFormat && format != "strata-checkpoint-1")
    throw CheckpointError(trainer_path + ": corrupt or from a newer Strata: format '" + format + "' (this one reads " +
                          kTierCheckpointFormat + ", " + kCheckpointFormat + " and strata-checkpoint-1)");
  // The directory's name says its step (a temporary's too: ".step_00000005.tmp-PID").
  std::string name = step_directory.filename().string();
  if (name.starts_with(".")) name.erase(0, 1);
  if (name.starts_with("step_") && trainer.contains("step") && trainer["step"].is_number_integer()) {
    const std::string digits = name.substr(5, name.find_first_not_of("0123456789", 5) - 5);
    if (!digits.empty() && digits.size() < 19 && std::stoll(digits) != trainer["step"].get<std::int64_t>())
      throw CheckpointError(trainer_path + ": corrupt: step " + trainer["step"].dump() + " in a directory named " +
                            step_directory.filename().string());
  }
  if (format == "strata-checkpoint-1") return;  // saved before files were listed
  if (!trainer.contains("files") || !trainer["files"].is_object())
    throw CheckpointError(trainer_path + ": corrupt: a " + format + " save lists its files, and this one does not");
  const nlohmann::json& files = trainer["files"];
  for (const auto& [file, checksum] : files.items()) {
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == ".." || file == "trainer.json")
      throw CheckpointError(trainer_path + ": corrupt: lists '" + file + "', which is not a file of the save");
    const fs::path path = step_directory / file;
    std::error_code error;
    if (!fs::is_regular_file(path, error))
      throw CheckpointError(path.string() + ": missing: trainer.json lists it (the save is incomplete)");
    const auto known = read_checksums.find(file);
    const std::string actual = known != read_checksums.end() ? known->second : bytes_checksum(read_save_file(path));
    if (!checksum.is_string() || checksum.get<std::string>() != actual)
      throw CheckpointError(path.string() +
                            ": corrupt checkpoint: its bytes do not match the checksum trainer.json records");
  }
  // The tier's rows a save links: each listed file present (their checksums are read with their
  // tensors: tier_tensors), and nothing else in tier/.
  const nlohmann::json& tier = tier_files_of(trainer);
  std::set<std::string> tier_names;
  if (tier.is_object() && !tier.empty()) require_tier_folder(step_directory);
  if (tier.is_object())
    for (const auto& [name, entry] : tier.items()) {
      const fs::path path = tier_file_path(step_directory, entry);
      tier_names.insert(std::string(kTierDirectory) + "/" + path.filename().string());
      std::error_code missing;
      if (!fs::is_regular_file(fs::symlink_status(path, missing)))
        throw CheckpointError(path.string() +
                              ": missing or not a regular file: trainer.json lists it (the save is "
                              "incomplete or altered)");
    }
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(step_directory, error)) {
    const std::string file = entry.path().filename().string();
    if (file == kTierDirectory && !tier_names.empty()) {
      for (const fs::directory_entry& linked : fs::directory_iterator(entry.path(), error))
        if (!tier_names.contains(std::string(kTierDirectory) + "/" + linked.path().filename().string()))
          throw CheckpointError(linked.path().string() +
                                ": corrupt checkpoint: trainer.json records no checksum for it");
      continue;
    }
    if (file != "trainer.json" && !files.contains(file))
      throw CheckpointError(entry.path().string() + ": corrupt checkpoint: trainer.json records no checksum for it");
  }
  if (error) throw CheckpointError(step_directory.string() + ": cannot list the save: " + error.message());
}

VerifiedSave verify_save(const fs::path& step_directory, bool mapped) {
  VerifiedSave verified;
  const fs::path trainer_path = step_directory / "trainer.json";
  nlohmann::json trainer;
  try {
    trainer = nlohmann::json::parse(read_save_file(trainer_path));
    if (!trainer.at("step").is_number_integer() || trainer.at("step").get<std::int64_t>() < 1)
      throw CheckpointError(trainer_path.string() + ": corrupt: step " + trainer.at("step").dump() +
                            " is not a step of a run");
    verified.step = trainer.at("step").get<std::int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(trainer_path.string() + ": corrupt: " + e.what());
  }
  std::error_code error;
  std::map<std::string, std::string> read_checksums;
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    verified.tensors += verify_tensors(step_directory / name, read_checksums[name], mapped);
    verified.bytes += fs::file_size(step_directory / name, error);
  }
  check_save_files(step_directory, trainer, read_checksums);
  // Rows of the disk tier the save linked: a run's own read-back checks their sizes (reading them
  // would cost the save what linking saved); `strata verify` reads each against its checksum.
  for (const char* name : {"model.safetensors", "optimizer.safetensors"})
    for (const SafetensorsFile& linked : tier_tensors(step_directory, trainer, name, !mapped)) {
      for (const auto& [tensor, entry] : linked.entries()) {
        if (!mapped)
          if (const auto bad = linked.first_non_finite(tensor))
            throw CheckpointError(linked.path().string() + ": corrupt checkpoint: tensor '" + tensor + "' holds " +
                                  std::to_string(bad->value) + " at element " + std::to_string(bad->index));
        linked.release(tensor);
      }
      verified.tensors += 1;
      verified.bytes += fs::file_size(linked.path(), error);
    }
  if (trainer.contains("files") && trainer["files"].is_object())
    for (const auto& [name, checksum] : trainer["files"].items())
      if (name.ends_with(".bin")) verified.bytes += fs::file_size(step_directory / name, error);
  return verified;
}

bool DirectoryVerdict::ok() const {
  return latest_fault.empty() &&
         std::all_of(saves.begin(), saves.end(), [](const SaveVerdict& save) { return save.fault.empty(); });
}

DirectoryVerdict verify_checkpoint_directory(const fs::path& path) {
  DirectoryVerdict verdict;
  const auto check = [&](const fs::path& directory) {
    SaveVerdict save{directory, {}, {}};
    try {
      save.save = verify_save(directory);
    } catch (const CheckpointError& e) {
      save.fault = e.what();
    } catch (const fs::filesystem_error& e) {
      save.fault = e.what();
    }
    verdict.saves.push_back(std::move(save));
  };
  if (fs::is_regular_file(path / "trainer.json") && !fs::exists(path / "latest")) {
    check(path);
    return verdict;
  }
  std::error_code error;
  const std::vector<fs::path> saves = step_directories(path, error);
  if (error) throw CheckpointError(path.string() + ": cannot list it: " + error.message());
  if (saves.empty() && !fs::exists(path / "latest"))
    throw CheckpointError(path.string() + ": not a checkpoint directory (no 'latest', trainer.json or step_* saves)");
  for (const fs::path& save : saves) check(save);
  try {
    const fs::path latest = resolve_checkpoint(path);
    const auto named = std::find_if(verdict.saves.begin(), verdict.saves.end(),
                                    [&](const SaveVerdict& save) { return save.directory == latest; });
    if (named == verdict.saves.end())
      verdict.latest_fault =
          (path / "latest").string() + ": names " + latest.filename().string() + ", which is missing";
    else if (!named->fault.empty())
      verdict.latest_fault =
          (path / "latest").string() + ": names " + latest.filename().string() + ", which is corrupt";
  } catch (const CheckpointError& e) {
    verdict.latest_fault = e.what();
  }
  return verdict;
}

}  // namespace strata
