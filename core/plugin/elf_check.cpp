#include "core/plugin/elf_check.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace strata {

std::string check_elf_library(const std::filesystem::path& path) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return "cannot load: " + error.message();
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open it for reading";
  Elf64_Ehdr header{};
  if (!in.read(reinterpret_cast<char*>(&header), sizeof header))
    return "not a shared library: " + std::to_string(size) + " bytes, shorter than an ELF header";
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return "not a shared library: no ELF magic number";
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_type != ET_DYN)
    return "not a 64-bit ELF shared object (class " + std::to_string(header.e_ident[EI_CLASS]) + ", type " +
           std::to_string(header.e_type) + ")";
#if defined(__x86_64__)
  if (header.e_machine != EM_X86_64)
    return "built for another machine (ELF e_machine " + std::to_string(header.e_machine) + ")";
#elif defined(__aarch64__)
  if (header.e_machine != EM_AARCH64)
    return "built for another machine (ELF e_machine " + std::to_string(header.e_machine) + ")";
#endif
  const auto beyond = [size](std::uint64_t offset, std::uint64_t bytes) {
    return offset > size || bytes > size - offset;
  };
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      beyond(header.e_phoff, std::uint64_t{header.e_phnum} * sizeof(Elf64_Phdr)))
    return "truncated or corrupt: its program headers lie beyond the file's " + std::to_string(size) + " bytes";
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  in.seekg(static_cast<std::streamoff>(header.e_phoff));
  if (!in.read(reinterpret_cast<char*>(segments.data()),
               static_cast<std::streamsize>(segments.size() * sizeof(Elf64_Phdr))))
    return "truncated: cannot read its program headers";
  for (const Elf64_Phdr& segment : segments)
    if (segment.p_type == PT_LOAD && beyond(segment.p_offset, segment.p_filesz))
      return "truncated: a loaded segment spans bytes [" + std::to_string(segment.p_offset) + ", " +
             std::to_string(segment.p_offset + segment.p_filesz) + ") of a " + std::to_string(size) + "-byte file";
  if (header.e_shnum != 0 && beyond(header.e_shoff, std::uint64_t{header.e_shnum} * header.e_shentsize))
    return "truncated: its section headers lie beyond the file's " + std::to_string(size) + " bytes";
  return {};
}

}  // namespace strata
