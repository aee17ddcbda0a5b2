#include "core/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "core/util/atomic_file.hpp"
#include "strata/dtype.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace strata {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "I8" || dtype == "U8") return 1;
  return 0;
}

// The dtypes tensor() converts to f32.
bool floating(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

// A header number that must be a non-negative integer. nlohmann's get<> would convert a float or a
// negative number too (and a float out of range is undefined behaviour), so the type is checked.
std::uint64_t non_negative_integer(const nlohmann::json& value, const std::string& what) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  throw CheckpointError(what + " must hold non-negative integers, not " + text);
}

float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t mantissa = half & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

// Element i of a floating tensor's bytes (F32, F16 or BF16) as f32; the bytes need no alignment.
float element_as_f32(const char* source, const std::string& dtype, std::size_t i) {
  if (dtype == "F32") {
    float value;
    std::memcpy(&value, source + 4 * i, 4);
    return value;
  }
  std::uint16_t half;
  std::memcpy(&half, source + 2 * i, 2);
  return dtype == "BF16" ? bf16_to_f32(half) : half_to_float(half);
}

std::string hex_text(XXH64_hash_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// Each piece of a tensor, in order, into `buffer`, handed to `use`.
template <typename Use>
void for_each_piece(const TensorPieces& tensor, std::vector<std::byte>& buffer, Use&& use) {
  for (std::uint64_t offset = 0; offset < tensor.bytes;) {
    const std::uint64_t size = std::min<std::uint64_t>(buffer.size(), tensor.bytes - offset);
    const std::span<std::byte> piece(buffer.data(), size);
    tensor.read(offset, piece);
    use(std::string_view(reinterpret_cast<const char*>(piece.data()), piece.size()));
    offset += size;
  }
}

}  // namespace

std::string checksum_text(std::uint64_t checksum) {
  return hex_text(checksum);
}

std::string bytes_checksum(std::string_view bytes) {
  return hex_text(XXH3_64bits(bytes.data(), bytes.size()));
}

std::string safetensors_head(const std::vector<HeadEntry>& entries,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  nlohmann::ordered_json checksums = nlohmann::ordered_json::object();
  for (const HeadEntry& entry : entries) checksums[entry.name] = entry.checksum;
  std::map<std::string, std::string> all_metadata = metadata;
  all_metadata[kChecksumsKey] = checksums.dump();
  header["__metadata__"] = all_metadata;
  std::uint64_t offset = 0;
  for (const HeadEntry& entry : entries) {
    header[entry.name] = {
        {"dtype", entry.dtype}, {"shape", entry.shape}, {"data_offsets", {offset, offset + entry.bytes}}};
    offset += entry.bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  const std::uint64_t header_size = header_text.size();
  std::string head;
  for (int i = 0; i < 8; ++i) head.push_back(static_cast<char>((header_size >> (8 * i)) & 0xff));
  return head + header_text;
}

std::vector<std::string_view> safetensors_pieces(const std::vector<TensorToWrite>& tensors,
                                                 const std::map<std::string, std::string>& metadata,
                                                 std::string& head) {
  const auto bytes_of = [](const TensorToWrite& tensor) {
    return tensor.data.empty()
               ? std::string_view(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size())
               : std::string_view(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size_bytes());
  };
  std::vector<HeadEntry> entries;
  for (const TensorToWrite& tensor : tensors)
    entries.push_back({tensor.name, tensor.shape, tensor.data.empty() ? tensor.dtype : "F32", bytes_of(tensor).size(),
                       bytes_checksum(bytes_of(tensor))});
  head = safetensors_head(entries, metadata);
  std::vector<std::string_view> pieces{head};
  for (const TensorToWrite& tensor : tensors) pieces.push_back(bytes_of(tensor));
  return pieces;
}

std::string encode_safetensors(const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::string head;
  const std::vector<std::string_view> pieces = safetensors_pieces(tensors, metadata, head);
  std::string out;
  for (const std::string_view piece : pieces) out += piece;
  return out;
}

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path, std::string* file_checksum) {
  const std::string where = path.string() + ": ";
  std::error_code error;
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error))
    throw CheckpointError(where + "not a regular file (checkpoints are read from regular files only)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(where + "cannot open (no such file?)");
  // One read of the known size: a byte-wise iterator over a gigabyte costs seconds.
  std::vector<char> bytes(static_cast<std::size_t>(std::filesystem::file_size(path, error)));
  if (error || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw CheckpointError(where + "unreadable" + (error ? ": " + error.message() : std::string()));
  if (file_checksum != nullptr) {
    *file_checksum = bytes_checksum({bytes.data(), bytes.size()});
  }
  return parse_owned(std::move(bytes), path);
}

SafetensorsFile SafetensorsFile::map(const std::filesystem::path& path, std::string* file_checksum, Paging paging) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat status {};
  if (fd < 0 || ::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size < 8) {
    if (fd >= 0) ::close(fd);
    return read(path, file_checksum);  // read() names what is wrong
  }
  const auto size = static_cast<std::size_t>(status.st_size);
  // The pages the save just wrote, shared with the page cache: no copy, no zeroed memory.
  void* mapping =
      ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | (paging == Paging::populate ? MAP_POPULATE : 0), fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) return read(path, file_checksum);
  std::shared_ptr<const char> storage(static_cast<const char*>(mapping),
                                      [size](const char* bytes) { ::munmap(const_cast<char*>(bytes), size); });
  const std::span<const char> bytes(storage.get(), size);
  if (file_checksum != nullptr) {
    if (paging == Paging::populate) {
      *file_checksum = bytes_checksum({bytes.data(), bytes.size()});
    } else {  // a piece at a time, each piece's whole pages handed back once hashed
      const std::size_t piece = std::size_t{64} << 20;  // a multiple of every page size
      XXH3_state_t state;
      XXH3_64bits_reset(&state);
      for (std::size_t offset = 0; offset < size; offset += piece) {
        const std::size_t length = std::min(piece, size - offset);
        XXH3_64bits_update(&state, bytes.data() + offset, length);
        ::madvise(const_cast<char*>(bytes.data() + offset), length, MADV_DONTNEED);
      }
      *file_checksum = hex_text(XXH3_64bits_digest(&state));
    }
  }
  SafetensorsFile file = parse_storage(std::move(storage), bytes, path, paging == Paging::on_demand);
  file.mapped_ = true;
  return file;
}

SafetensorsFile SafetensorsFile::map_raw(const std::filesystem::path& path, const RawTensor& tensor, bool check) {
  const std::string where = path.string() + ": ";
  // The byte count without overflow: a wrapped product could pass the size check.
  std::uint64_t elements = 1;
  bool overflow = false;
  for (std::int64_t extent : tensor.shape) {
    if (extent < 0) throw CheckpointError(where + "corrupt: tensor '" + tensor.name + "' has a negative extent");
    const auto count = static_cast<std::uint64_t>(extent);
    overflow = overflow || (count != 0 && elements > std::numeric_limits<std::uint64_t>::max() / count);
    elements = overflow ? 0 : elements * count;
  }
  const std::uint64_t element_bytes = dtype_size(tensor.dtype);
  overflow = overflow || (element_bytes != 0 && elements > std::numeric_limits<std::uint64_t>::max() / element_bytes);
  const std::uint64_t tensor_bytes = overflow ? 0 : elements * element_bytes;
  if (element_bytes == 0 || overflow || tensor_bytes > tensor.hashed_bytes)
    throw CheckpointError(where + "corrupt: tensor '" + tensor.name + "' (" + tensor.dtype + " " +
                          shape_text(tensor.shape) + ") does not fit the " + std::to_string(tensor.hashed_bytes) +
                          " bytes recorded for it");
  // Not through a symbolic link, and never waiting on a FIFO: a save's own regular files only.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat status {};
  if (fd < 0 || ::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    if (fd >= 0) ::close(fd);
    throw CheckpointError(where + "missing or not a regular file (the save is incomplete or altered)");
  }
  const auto size = static_cast<std::uint64_t>(status.st_size);
  if (size < tensor.hashed_bytes) {
    ::close(fd);
    throw CheckpointError(where + "truncated: " + std::to_string(size) + " bytes, " +
                          std::to_string(tensor.hashed_bytes) + " recorded");
  }
  void* mapping = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) throw CheckpointError(where + "cannot be mapped: " + std::strerror(errno));
  std::shared_ptr<const char> storage(static_cast<const char*>(mapping), [size](const char* bytes) {
    if (bytes != nullptr) ::munmap(const_cast<char*>(bytes), size);
  });
  if (check) {
    const std::size_t piece = std::size_t{64} << 20;  // a multiple of every page size
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (std::uint64_t offset = 0; offset < tensor.hashed_bytes; offset += piece) {
      const std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(piece, tensor.hashed_bytes - offset));
      XXH3_64bits_update(&state, storage.get() + offset, length);
      ::madvise(const_cast<char*>(storage.get() + offset), length, MADV_DONTNEED);
    }
    if (const std::string actual = hex_text(XXH3_64bits_digest(&state)); actual != tensor.checksum)
      throw CheckpointError(where + "corrupt checkpoint: tensor '" + tensor.name + "' fails its checksum (saved xxh3 " +
                            tensor.checksum + ", read " + actual + "): its bytes changed after it was written");
  }
  SafetensorsFile file;
  file.path_ = path;
  file.storage_ = std::move(storage);
  file.bytes_ = std::span<const char>(file.storage_.get(), static_cast<std::size_t>(tensor_bytes));
  file.payload_begin_ = 0;
  file.mapped_ = true;
  file.entries_.emplace(tensor.name, Entry{tensor.dtype, tensor.shape, 0, tensor_bytes});
  return file;
}

void SafetensorsFile::release(const std::string& name) const noexcept {
  const auto found = entries_.find(name);
  if (!mapped_ || found == entries_.end()) return;
  release_bytes(found->second.begin, found->second.end);
}

void SafetensorsFile::release_slice(const std::string& name, std::size_t first, std::size_t count) const noexcept {
  const auto found = entries_.find(name);
  if (!mapped_ || found == entries_.end()) return;
  const std::size_t size = dtype_size(found->second.dtype);
  const std::uint64_t begin = found->second.begin + first * size;
  release_bytes(begin, std::min<std::uint64_t>(found->second.end, begin + count * size));
}

void SafetensorsFile::release_bytes(std::uint64_t begin_offset, std::uint64_t end_offset) const noexcept {
  // Whole pages inside the bytes only: a page shared with a neighbour stays.
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(payload() + begin_offset);
  const auto end = reinterpret_cast<std::uintptr_t>(payload() + end_offset);
  const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

SafetensorsFile SafetensorsFile::parse(std::span<const char> bytes, const std::filesystem::path& path) {
  return parse_owned(std::vector<char>(bytes.begin(), bytes.end()), path);
}

SafetensorsFile SafetensorsFile::parse_owned(std::vector<char> bytes, const std::filesystem::path& path) {
  auto owned = std::make_shared<const std::vector<char>>(std::move(bytes));
  const std::span<const char> view(owned->data(), owned->size());
  return parse_storage(std::shared_ptr<const char>(owned, owned->data()), view, path);
}

SafetensorsFile SafetensorsFile::parse_storage(std::shared_ptr<const char> storage, std::span<const char> bytes,
                                               const std::filesystem::path& path, bool on_demand) {
  const std::string where = path.string() + ": ";
  if (bytes.size() < 8) throw CheckpointError(where + "truncated: " + std::to_string(bytes.size()) + " bytes");
  std::uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i)
    header_size |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]))
                   << (8 * i);
  if (header_size > bytes.size() - 8)
    throw CheckpointError(where + "corrupt or truncated: header length " + std::to_string(header_size) +
                          " exceeds the file");
  SafetensorsFile file;
  file.path_ = path;
  nlohmann::json header;
  try {
    // A name given twice would keep its last entry in silence: refused instead.
    std::set<std::string> names;
    const nlohmann::json::parser_callback_t refuse_repeated_names = [&](int depth, nlohmann::json::parse_event_t event,
                                                                        nlohmann::json& parsed) {
      if (depth == 1 && event == nlohmann::json::parse_event_t::key && !names.insert(parsed.get<std::string>()).second)
        throw CheckpointError(where + "corrupt header: tensor '" + parsed.get<std::string>() + "' is named twice");
      return true;
    };
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size),
                                   refuse_repeated_names);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(where + "corrupt header: " + e.what());
  }
  if (!header.is_object()) throw CheckpointError(where + "corrupt header: not a JSON object");
  // The file's bytes are kept whole, the tensors found past its header: one copy of a file in memory.
  file.payload_begin_ = 8 + static_cast<std::size_t>(header_size);
  file.storage_ = std::move(storage);
  file.bytes_ = bytes;
  try {
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        if (!value.is_object()) throw CheckpointError(where + "corrupt header: __metadata__ must be an object");
        for (const auto& [key, text] : value.items()) file.metadata_[key] = text.get<std::string>();
        continue;
      }
      const std::string context = where + "corrupt header: tensor '" + name + "': ";
      Entry entry;
      entry.dtype = value.at("dtype").get<std::string>();
      const nlohmann::json& shape = value.at("shape");
      const nlohmann::json& offsets = value.at("data_offsets");
      if (!shape.is_array()) throw CheckpointError(context + "shape must be an array");
      if (!offsets.is_array() || offsets.size() != 2)
        throw CheckpointError(context + "data_offsets must be an array of 2 entries");
      // The byte count is computed without overflow: a wrapped product could match the data's size.
      constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
      std::uint64_t elements = 1;
      bool overflow = false;
      for (const nlohmann::json& extent : shape) {
        const std::uint64_t count = non_negative_integer(extent, context + "shape");
        if (count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          throw CheckpointError(context + "shape extent " + std::to_string(count) + " is too large");
        entry.shape.push_back(static_cast<std::int64_t>(count));
        overflow = overflow || (count != 0 && elements > kMax / count);
        elements = overflow ? 0 : elements * count;
      }
      entry.begin = non_negative_integer(offsets[0], context + "data_offsets");
      entry.end = non_negative_integer(offsets[1], context + "data_offsets");
      if (entry.begin > entry.end || entry.end > file.payload_size())
        throw CheckpointError(where + "truncated or corrupt: tensor '" + name + "' spans bytes [" +
                              std::to_string(entry.begin) + ", " + std::to_string(entry.end) + ") of " +
                              std::to_string(file.payload_size()));
      const std::uint64_t size = dtype_size(entry.dtype);
      if (size != 0 && (overflow || elements > kMax / size || elements * size != entry.end - entry.begin))
        throw CheckpointError(where + "corrupt: tensor '" + name + "' has shape " + shape_text(entry.shape) + " but " +
                              std::to_string(entry.end - entry.begin) + " bytes");
      file.entries_.emplace(name, std::move(entry));
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(where + "corrupt header: " + e.what());
  }
  // As the format requires, the tensors tile the data exactly: no two share a byte, none is left out.
  std::vector<std::pair<std::uint64_t, std::string>> starts;
  for (const auto& [name, entry] : file.entries_) starts.emplace_back(entry.begin, name);
  std::sort(starts.begin(), starts.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, name] : starts) {
    if (begin != covered)
      throw CheckpointError(where + "corrupt: tensor '" + name + "' starts at byte " + std::to_string(begin) +
                            (begin < covered ? ", inside the previous tensor (overlapping byte ranges)"
                                             : ", leaving bytes [" + std::to_string(covered) + ", " +
                                                   std::to_string(begin) + ") that no tensor covers"));
    covered = file.entries_.at(name).end;
  }
  if (covered != file.payload_size())
    throw CheckpointError(where + "corrupt: the tensors cover " + std::to_string(covered) + " of " +
                          std::to_string(file.payload_size()) + " data bytes");
  file.mapped_ = on_demand;  // so that each checksum hands its tensor's pages back
  file.verify_checksums();
  return file;
}

void SafetensorsFile::verify_checksums() const {
  const auto recorded = metadata_.find(kChecksumsKey);
  if (recorded == metadata_.end()) return;  // a file from elsewhere: nothing to check against
  const std::string where = path_.string() + ": corrupt checkpoint: ";
  nlohmann::json checksums;
  try {
    checksums = nlohmann::json::parse(recorded->second);
  } catch (const nlohmann::json::exception&) {
    throw CheckpointError(where + "its " + kChecksumsKey + " metadata is not JSON");
  }
  if (!checksums.is_object() || checksums.size() != entries_.size())
    throw CheckpointError(where + "its " + kChecksumsKey + " metadata lists " +
                          std::to_string(checksums.is_object() ? checksums.size() : 0) + " tensors, the file holds " +
                          std::to_string(entries_.size()));
  for (const auto& [name, entry] : entries_) {
    const auto saved = checksums.find(name);
    if (saved == checksums.end() || !saved->is_string())
      throw CheckpointError(where + "tensor '" + name + "' has no checksum in its " + kChecksumsKey + " metadata");
    const std::string actual = bytes_checksum({payload() + entry.begin, entry.end - entry.begin});
    if (saved->get<std::string>() != actual)
      throw CheckpointError(where + "tensor '" + name + "' fails its checksum (saved xxh3 " +
                            saved->get<std::string>() + ", read " + actual +
                            "): its bytes changed after it was written");
    release(name);
  }
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  auto found = entries_.find(name);
  if (found == entries_.end()) throw CheckpointError(path_.string() + ": missing tensor '" + name + "'");
  return found->second;
}

std::string safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i8: return "I8";
    case DType::u8: return "U8";
    // safetensors has no 4-bit type, and a tensor's shape counts elements: 4-bit codes are saved as
    // the U8 bytes that hold them, by whoever packs them.
    case DType::u4: throw std::logic_error("a u4 tensor has no safetensors dtype: save the U8 bytes that pack it");
    case DType::f32: break;
  }
  return "F32";
}

std::span<const std::byte> SafetensorsFile::raw(const std::string& name, const std::string& expected_dtype,
                                                const std::vector<std::int64_t>& expected_shape) const {
  const Entry& e = entry(name);
  if (e.dtype != expected_dtype || e.shape != expected_shape)
    throw CheckpointError(path_.string() + ": tensor '" + name + "' is " + e.dtype + " " + shape_text(e.shape) +
                          ", the model expects " + expected_dtype + " " + shape_text(expected_shape));
  return {reinterpret_cast<const std::byte*>(payload()) + e.begin, static_cast<std::size_t>(e.end - e.begin)};
}

std::vector<float> SafetensorsFile::tensor(const std::string& name,
                                           const std::vector<std::int64_t>& expected_shape) const {
  return tensor_slice(name, expected_shape, 0, std::numeric_limits<std::size_t>::max());
}

std::vector<float> SafetensorsFile::tensor_slice(const std::string& name,
                                                 const std::vector<std::int64_t>& expected_shape, std::size_t first,
                                                 std::size_t count) const {
  const Entry& e = entry(name);
  if (e.shape != expected_shape)
    throw CheckpointError(path_.string() + ": tensor '" + name + "' has shape " + shape_text(e.shape) +
                          ", the model expects " + shape_text(expected_shape));
  const std::size_t size = dtype_size(e.dtype);
  if (size == 0 || !floating(e.dtype))
    throw CheckpointError(path_.string() + ": tensor '" + name + "' has unsupported dtype " + e.dtype);
  const std::size_t elements = (e.end - e.begin) / size;
  first = std::min(first, elements);
  count = std::min(count, elements - first);
  std::vector<float> values(count);
  const char* source = payload() + e.begin + first * size;
  if (e.dtype == "F32") {
    if (count != 0) std::memcpy(values.data(), source, count * 4);  // an empty vector's data() may be null
  } else {
    for (std::size_t i = 0; i < count; ++i) values[i] = element_as_f32(source, e.dtype, i);
  }
  return values;
}

std::optional<SafetensorsFile::NonFinite> SafetensorsFile::first_non_finite(const std::string& name) const {
  const Entry& e = entry(name);
  const std::size_t size = dtype_size(e.dtype);
  if (size == 0 || !floating(e.dtype)) return std::nullopt;
  const char* source = payload() + e.begin;
  const std::size_t count = (e.end - e.begin) / size;
  for (std::size_t i = 0; i < count; ++i) {
    const float value = element_as_f32(source, e.dtype, i);
    if (!std::isfinite(value)) return NonFinite{i, value};
  }
  return std::nullopt;
}

std::string write_safetensors_in_pieces(const std::filesystem::path& path, const std::vector<TensorPieces>& tensors,
                                        const std::map<std::string, std::string>& metadata, std::uint64_t piece_bytes) {
  std::uint64_t largest = 0;
  for (const TensorPieces& tensor : tensors) largest = std::max(largest, tensor.bytes);
  std::vector<std::byte> buffer(static_cast<std::size_t>(std::max<std::uint64_t>(1, std::min(largest, piece_bytes))));
  XXH3_state_t state;
  std::vector<HeadEntry> entries;
  for (const TensorPieces& tensor : tensors) {
    XXH3_64bits_reset(&state);
    for_each_piece(tensor, buffer,
                   [&](std::string_view piece) { XXH3_64bits_update(&state, piece.data(), piece.size()); });
    entries.push_back({tensor.name, tensor.shape, tensor.dtype, tensor.bytes, hex_text(XXH3_64bits_digest(&state))});
  }
  const std::string head = safetensors_head(entries, metadata);
  AtomicFileWriter file(path);
  XXH3_64bits_reset(&state);
  const auto append = [&](std::string_view bytes) {
    file.append(bytes);
    XXH3_64bits_update(&state, bytes.data(), bytes.size());
  };
  append(head);
  for (const TensorPieces& tensor : tensors) for_each_piece(tensor, buffer, append);
  file.commit();
  return hex_text(XXH3_64bits_digest(&state));
}

}  // namespace strata
