#pragma once
// The predictor's checkpoint state as bytes: values appended in a fixed order and read back in the
// same order, each array preceded by its length so a state saved with other settings is refused
// rather than misread.
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace strata::rssm {

class StateWriter {
 public:
  template <typename T>
  void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void array(std::span<const T> values) {
    value(static_cast<std::uint64_t>(values.size()));
    bytes_.append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T value() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  // Into `out`, whose length must be the saved one.
  template <typename T>
  void array(std::span<T> out, std::string_view what) {
    const auto count = value<std::uint64_t>();
    if (count != out.size())
      throw std::runtime_error("the saved " + std::string(what) + " has " + std::to_string(count) +
                               " values, this run's " + std::to_string(out.size()) +
                               " (saved with other predictor settings or another model?)");
    if (count > 0) std::memcpy(out.data(), take(out.size_bytes()), out.size_bytes());
  }
  bool finished() const noexcept { return at_ == bytes_.size(); }

 private:
  const char* take(std::size_t count) {
    if (bytes_.size() - at_ < count) throw std::runtime_error("the saved predictor state is truncated");
    const char* p = bytes_.data() + at_;
    at_ += count;
    return p;
  }
  std::string_view bytes_;
  std::size_t at_ = 0;
};

}  // namespace strata::rssm
