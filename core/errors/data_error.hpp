#pragma once
#include <stdexcept>
#include <string>

namespace strata {

// Missing, malformed or unusable training data; the message names the file and the problem.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace strata
