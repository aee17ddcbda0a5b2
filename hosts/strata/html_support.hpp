#pragma once
// What the HTML reports (`strata ab --html`, `strata plan --html`) share: escaping, numbers, and
// one colour per memory category, so a category looks the same on every chart.
#include <string>

#include "strata/memory_category.hpp"

namespace strata {

std::string html_escape(const std::string& text);
std::string fixed_number(double value, int decimals);
std::string mib_text(double bytes);  // "12.3 MiB"
const char* category_color(MemoryCategory category);
// The page's head and its style, up to and including <body>.
std::string html_page_start(const std::string& title);

}  // namespace strata
