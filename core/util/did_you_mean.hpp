#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// The closest candidate within a small edit distance, or empty.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);
// "a, b, c"
std::string join_words(const std::vector<std::string>& words);

}  // namespace strata
