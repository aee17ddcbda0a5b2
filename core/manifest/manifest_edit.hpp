#pragma once
// A manifest rewritten as its author would edit it: the user's own text, with only the keys that
// differ from `wanted` changed, added or removed, so comments, key order and the way each untouched
// value is written (lr = 3e-4, memory_limit = "256MiB") stay. `strata plan --fit --write` writes
// the stack it chose this way.
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace strata {

// `original` edited to parse as `wanted`: a top-level table's plain keys are changed in place (the
// line's comment kept), added after the table's last key, or removed; a table `wanted` lacks is
// removed, a new one appended; an array of tables ([[strategy]]) that differs is written anew at
// the end. Empty when the result would not parse as `wanted` (a key written in a form this
// editor does not edit, such as a dotted key or an inline table): the caller writes the document.
std::optional<std::string> edit_manifest_text(std::string_view original, const toml::table& wanted);

}  // namespace strata
