#pragma once
// Plugin libraries are loaded first in a forked child, before the host loads them. dlopen runs a
// library's relocations and initialisers, and a corrupt relocation (one flipped bit in .rela.dyn)
// or a faulty initialiser kills the process inside the loader, for every command, even one whose
// manifest never names the plugin. The ELF check (elf_check.hpp) cannot see such damage; a child
// that dies in the host's place can. One child loads the libraries in turn and says which it is
// loading, so a scan costs one fork, not one per library; a child that dies names its library,
// and a fresh child goes on with the rest.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace strata {

// One verdict per path, in order: empty when the child loaded the library (dlopen with immediate
// binding) and read its descriptor without dying; otherwise why not ("crashed the loader: ...").
// A library that merely fails to load is left to the host's own dlopen, which names the reason.
std::vector<std::string> probe_libraries_in_child(const std::vector<std::filesystem::path>& paths,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace strata
