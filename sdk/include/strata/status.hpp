#pragma once
// Errors cross the plugin boundary as values, never as exceptions.
#include <exception>
#include <string>
#include <type_traits>
#include <utility>

namespace strata {

class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  const std::string& message() const noexcept { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

// Runs `body` and turns any exception into an error Status, so a plugin's interface methods can
// be written naturally and still never throw across the boundary.
template <typename Body>
Status guarded(Body&& body) noexcept {
  try {
    if constexpr (std::is_same_v<decltype(body()), Status>) {
      return body();
    } else {
      body();
      return {};
    }
  } catch (const std::exception& e) {
    return Status::error(e.what());
  } catch (...) {
    return Status::error("unknown exception");
  }
}

}  // namespace strata
