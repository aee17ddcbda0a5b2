#pragma once
// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}),
// then the raw tensor bytes. Strata writes F32 weights, and optimizer state in its own dtype (F32,
// BF16, I8, U8); it reads F32, F16 and BF16 as f32, and any of its dtypes as raw bytes.
// Every file Strata writes records an XXH3-64 checksum of each tensor's bytes in its metadata
// (kChecksumsKey: a JSON object, name -> 16 hex digits); reading such a file verifies them, so a
// flipped bit is a corrupt checkpoint naming the tensor. Files without the key (from elsewhere) load.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "strata/dtype.hpp"

namespace strata {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kChecksumsKey = "strata_xxh3_64";

struct TensorToWrite {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;       // F32 values, or
  std::span<const std::byte> bytes;  // the raw bytes of `dtype` when data is empty
  std::string dtype = "F32";
};

// XXH3-64 of some bytes, 16 hex digits: a tensor's checksum as the metadata records it, and a
// file's as trainer.json records it ("files": {"model.safetensors": "<xxh3>", ...}).
std::string bytes_checksum(std::string_view bytes);

// The 16 hex digits bytes_checksum writes, of an XXH3-64 computed elsewhere (the disk tier's).
std::string checksum_text(std::uint64_t checksum);

// The safetensors name of a Strata dtype ("F32", "BF16", "I32", "I8", "U8").
std::string safetensors_dtype(DType dtype);

std::string encode_safetensors(const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata);

// The 8-byte length and the header of a file holding these tensors, in this order, each with its
// checksum (bytes_checksum) in the metadata.
struct HeadEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string dtype;
  std::uint64_t bytes = 0;
  std::string checksum;
};
std::string safetensors_head(const std::vector<HeadEntry>& entries, const std::map<std::string, std::string>& metadata);

// The same file as pieces to write in turn, without a copy of the tensors: the 8-byte length and
// the header (held in `head`, which must outlive the pieces), then each tensor's own bytes.
std::vector<std::string_view> safetensors_pieces(const std::vector<TensorToWrite>& tensors,
                                                 const std::map<std::string, std::string>& metadata, std::string& head);

// A tensor copied to the host a piece at a time as its file is written (a save of a model larger
// than the memory left beside it): at most one piece of tensor data is held at once, and the file
// is the one encode_safetensors makes of the same tensors, byte for byte.
struct TensorPieces {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string dtype;  // safetensors' name: "F32", "BF16", "I8", "U8"
  std::uint64_t bytes = 0;
  // Fills `out` with the tensor's bytes from `offset` on; called with offsets in increasing order
  // within a pass over the tensors.
  std::function<void(std::uint64_t offset, std::span<std::byte> out)> read;
};

// Writes the file atomically (util/atomic_file.hpp) and returns its checksum (bytes_checksum of
// the whole file). The header, which comes first, records each tensor's checksum, so each tensor
// is read twice: once for its checksum, once to be written. `piece_bytes`: the most held at once.
std::string write_safetensors_in_pieces(const std::filesystem::path& path, const std::vector<TensorPieces>& tensors,
                                        const std::map<std::string, std::string>& metadata,
                                        std::uint64_t piece_bytes = std::uint64_t{64} << 20);

class SafetensorsFile {
 public:
  // Reads and validates the whole file; throws CheckpointError naming the file and the problem.
  // With `file_checksum`, also sets it to the whole file's checksum (bytes_checksum), taken from
  // the one read.
  static SafetensorsFile read(const std::filesystem::path& path, std::string* file_checksum = nullptr);
  // The same, the file mapped rather than read (no copy of its bytes): only for a file no other
  // process changes while it is held, such as a save under its directory's lock, since a file cut
  // short under a mapping faults on access.
  // Paging says how: `populate` reads every page at once; `on_demand` reads a page when a tensor on
  // it is first read, and release() hands a tensor's pages back, so a model loads (and a save is
  // read back) with one tensor's file pages resident, not the file's: the whole-file checksum and
  // each tensor's checksum hand their pages back as they go.
  enum class Paging { populate, on_demand };
  static SafetensorsFile map(const std::filesystem::path& path, std::string* file_checksum = nullptr,
                             Paging paging = Paging::populate);
  // One tensor held raw, with no header: a row of the disk tier a save keeps by hard link
  // (checkpoint.hpp, "tier/"). Its first `hashed_bytes` bytes (the whole row) must match
  // `checksum` (bytes_checksum's text), checked a piece at a time with each piece's pages handed
  // back, unless `check` is false (a save's own read-back, which bounds its cost); the tensor is
  // the first dtype x shape bytes of them (a row may carry padding rows past the tensor's).
  // Throws CheckpointError naming the file.
  struct RawTensor {
    std::string name;
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t hashed_bytes = 0;
    std::string checksum;
  };
  static SafetensorsFile map_raw(const std::filesystem::path& path, const RawTensor& tensor, bool check = true);
  // The same from the file's bytes; `path` names the file in messages and nothing is read from it.
  static SafetensorsFile parse(std::span<const char> bytes, const std::filesystem::path& path);

  struct Entry {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };
  bool has(const std::string& name) const { return entries_.contains(name); }
  const Entry& entry(const std::string& name) const;
  // The tensor's raw bytes, checked against an expected dtype and shape.
  std::span<const std::byte> raw(const std::string& name, const std::string& expected_dtype,
                                 const std::vector<std::int64_t>& expected_shape) const;
  // The tensor as f32, checked against an expected shape.
  std::vector<float> tensor(const std::string& name, const std::vector<std::int64_t>& expected_shape) const;
  // Elements [first, first + count) of it, in row-major order, as f32: a large tensor converted a
  // slice at a time.
  std::vector<float> tensor_slice(const std::string& name, const std::vector<std::int64_t>& expected_shape,
                                  std::size_t first, std::size_t count) const;
  // The first value of a floating tensor (F32, F16, BF16) that is not finite, as f32, and its
  // index; none for a finite or non-floating tensor. Reads in place, without a copy.
  struct NonFinite {
    std::size_t index = 0;
    float value = 0.0f;
  };
  std::optional<NonFinite> first_non_finite(const std::string& name) const;
  // Drops the pages holding only `name` from this process's memory (they are read again from the
  // file if touched); nothing for a file read in.
  void release(const std::string& name) const noexcept;
  // The same for the pages holding only elements [first, first + count) of it.
  void release_slice(const std::string& name, std::size_t first, std::size_t count) const noexcept;
  const std::map<std::string, Entry>& entries() const noexcept { return entries_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  static SafetensorsFile parse_owned(std::vector<char> bytes, const std::filesystem::path& path);
  // `on_demand`: a mapping whose pages each tensor's checksum hands back once read.
  static SafetensorsFile parse_storage(std::shared_ptr<const char> storage, std::span<const char> bytes,
                                       const std::filesystem::path& path, bool on_demand = false);
  // Throws CheckpointError naming the first tensor whose bytes differ from their recorded checksum.
  void verify_checksums() const;
  void release_bytes(std::uint64_t begin_offset, std::uint64_t end_offset) const noexcept;

  std::filesystem::path path_;
  const char* payload() const noexcept { return bytes_.data() + payload_begin_; }
  std::size_t payload_size() const noexcept { return bytes_.size() - payload_begin_; }

  std::shared_ptr<const char> storage_;  // owns the bytes: a buffer read in, or a mapping
  bool mapped_ = false;
  std::span<const char> bytes_;  // the whole file; tensor offsets count from payload_begin_
  std::size_t payload_begin_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace strata
