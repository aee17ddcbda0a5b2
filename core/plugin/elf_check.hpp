#pragma once
// A plugin library is checked against its own ELF headers before dlopen maps it: a truncated file
// would be mapped past its end, and the first touch of a missing page kills the process with
// SIGBUS inside the loader, for every command, even one whose manifest never names the plugin.
#include <filesystem>
#include <string>

namespace strata {

// Empty when `path` is a 64-bit ELF shared object for this machine whose headers, program headers
// and loaded segments all lie within the file; otherwise why not ("truncated: ...").
std::string check_elf_library(const std::filesystem::path& path);

}  // namespace strata
