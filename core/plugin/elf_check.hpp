#pragma once
// A plugin library is checked against its own ELF headers before dlopen maps it: a truncated file
// would be mapped past its end, and the first touch of a missing page kills the process with
// SIGBUS inside the loader, for every command, even one whose manifest never names the plugin;
// a junk dynamic section can end it in an ld.so assertion.
#include <filesystem>
#include <string>

namespace strata {

// Empty when `path` is a 64-bit ELF shared object for this machine whose headers, program headers
// and loaded segments all lie within the file, and whose dynamic section the loader can follow
// (known tags, ended by DT_NULL, addresses inside loaded segments, names inside the string
// table); otherwise why not ("truncated: ...", "corrupt: its dynamic section ..."). A corrupt
// dynamic section can end the process in an ld.so assertion (exit 127) that no probe process is
// sure to meet first: the loader's path through it depends on the process.
std::string check_elf_library(const std::filesystem::path& path);

}  // namespace strata
