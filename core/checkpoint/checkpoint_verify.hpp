#pragma once
// Reading a save back before trusting it. A save is verified after its files are written and before
// `latest` moves or older saves are pruned, and `strata verify` runs the same check offline: every
// file a save holds parses, every tensor matches the checksum written beside it, every f32 value is
// finite, and the side files (predictor.bin, strategy_*.bin) match the checksums trainer.json records.
// The check needs no model: it finds corruption, not a checkpoint of another shape.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint/safetensors.hpp"

namespace strata {

struct VerifiedSave {
  std::int64_t step = 0;
  std::int64_t tensors = 0;  // in model.safetensors and optimizer.safetensors
  std::uint64_t bytes = 0;   // the files' sizes
};

// Throws CheckpointError naming the file and the fault. `mapped` maps the tensor files instead of
// reading them (SafetensorsFile::map): for the save a run has just written under its lock.
VerifiedSave verify_save(const std::filesystem::path& step_directory, bool mapped = false);

// Each save of a checkpoint directory (or the one save `path` is), checked; `latest` must name one.
struct SaveVerdict {
  std::filesystem::path directory;
  VerifiedSave save;
  std::string fault;  // empty: verified
};
struct DirectoryVerdict {
  std::vector<SaveVerdict> saves;
  std::string latest_fault;  // empty when `latest` names a verified save (or `path` is one save)
  bool ok() const;
};
DirectoryVerdict verify_checkpoint_directory(const std::filesystem::path& path);

// A file of a save, whole, in one read; throws CheckpointError when it is missing or unreadable.
std::string read_save_file(const std::filesystem::path& path);

// trainer.json's own checks, shared by a load and verify_save: a known format, a step matching its
// directory's name, and (format 2, from SDK 9.1 on) every file of the save listed by plain name
// and matching its whole-file checksum, every listed file present. `read_checksums` holds the
// checksums of files the caller has just read whole (file name -> bytes_checksum), so they are
// not read twice. Throws CheckpointError.
void check_save_files(const std::filesystem::path& step_directory, const nlohmann::json& trainer,
                      const std::map<std::string, std::string>& read_checksums = {});
inline constexpr const char* kCheckpointFormat = "strata-checkpoint-2";
// Format 2 with "tier_files": rows of the disk tier kept by hard link in the save's tier/ folder,
// each a raw tensor with its checksum (SafetensorsFile::map_raw), which the safetensors files omit.
inline constexpr const char* kTierCheckpointFormat = "strata-checkpoint-3";
inline constexpr const char* kTierDirectory = "tier";

// The save's tier/ tensors that belong in `file` ("model.safetensors" or "optimizer.safetensors"),
// mapped; `check`: their checksums read (a load, `strata verify`), else only their sizes (a save's
// own read-back). Throws CheckpointError naming the file.
std::vector<SafetensorsFile> tier_tensors(const std::filesystem::path& step_directory, const nlohmann::json& trainer,
                                          const std::string& file, bool check);

}  // namespace strata
