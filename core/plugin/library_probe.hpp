#pragma once
// Plugin libraries are loaded first in a probe process, before the host loads them. dlopen runs a
// library's relocations and initialisers, and a corrupt relocation (one flipped bit in .rela.dyn)
// or a faulty initialiser kills the process inside the loader, for every command, even one whose
// manifest never names the plugin. The ELF check (elf_check.hpp) cannot see such damage; a probe
// that dies in the host's place can. One probe loads the libraries in turn, then unloads them in
// turn (the host unloads its plugins when its registry goes, running their finalisers), saying
// which it is at, so a scan costs one process, not one per library; a probe that dies names its
// library, and a fresh one goes on with the rest.
//
// The probe is a forked child; in a process that has loaded the CUDA driver it is a fresh copy of
// the running program, spawned without a fork (posix_spawn of /proc/self/exe): the CUDA runtime
// does not support a fork after its first call (library_probe.cpp says what was seen). Where the
// spawn fails, no probe runs and the host loads the libraries as it would without one.
#include <boost/dll/shared_library_load_mode.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace strata {

// How the registry and the probe load a plugin library: symbols bound at once, kept local.
boost::dll::load_mode::type plugin_load_mode();

// How the probe starts: a fresh program where this process has loaded the CUDA driver, else a
// forked child (automatic), or as asked (tests).
enum class ProbeProcess { automatic, forked_child, fresh_program };

// One verdict per path, in order: empty when the child loaded the library (dlopen with immediate
// binding) and read its descriptor without dying; otherwise why not ("crashed the loader: ...").
// A library that merely fails to load is left to the host's own dlopen, which names the reason.
std::vector<std::string> probe_libraries_in_child(const std::vector<std::filesystem::path>& paths,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                                  ProbeProcess process = ProbeProcess::automatic);

}  // namespace strata
