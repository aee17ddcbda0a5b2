#include "core/plugin/elf_check.hpp"

#include <elf.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace strata {

namespace {

// A tag the dynamic loader may meet: the generic ones, the operating systems' range with the GNU
// value, address and versioning entries above it (up to DT_VERNEEDNUM), and the processors' range.
// Junk bytes are almost never all of these.
bool known_dynamic_tag(std::int64_t tag) {
  const auto in = [tag](std::int64_t low, std::int64_t high) { return tag >= low && tag <= high; };
  return in(DT_NULL, DT_NUM - 1) || in(DT_LOOS, DT_VERNEEDNUM) || in(DT_LOPROC, DT_HIPROC);
}

// Entries whose value is an address the loader reads through once the library is mapped.
bool holds_an_address(std::int64_t tag) {
  switch (tag) {
    case DT_PLTGOT:
    case DT_HASH:
    case DT_STRTAB:
    case DT_SYMTAB:
    case DT_RELA:
    case DT_INIT:
    case DT_FINI:
    case DT_REL:
    case DT_JMPREL:
    case DT_INIT_ARRAY:
    case DT_FINI_ARRAY:
    case DT_GNU_HASH:
    case DT_VERSYM:
    case DT_VERDEF:
    case DT_VERNEED: return true;
    default: return false;
  }
}

// Why the dynamic entries would send the loader outside the library ("holds an unknown entry ..."),
// or empty: every tag is one the loader may meet, the list ends with DT_NULL, it has a string and a
// symbol table, every address entry points into a loaded segment, and every name is an offset
// inside the string table.
std::string check_dynamic_section(const std::vector<Elf64_Dyn>& entries, const std::vector<Elf64_Phdr>& segments) {
  const auto loaded = [&segments](std::uint64_t address) {
    for (const Elf64_Phdr& segment : segments)
      if (segment.p_type == PT_LOAD && address >= segment.p_vaddr && address - segment.p_vaddr < segment.p_memsz)
        return true;
    return false;
  };
  std::uint64_t string_table_size = 0;
  bool ended = false;
  for (std::size_t i = 0; i < entries.size() && !ended; ++i) {
    const Elf64_Dyn& entry = entries[i];
    if (!known_dynamic_tag(entry.d_tag)) {
      char tag[32];
      std::snprintf(tag, sizeof tag, "0x%llx", static_cast<unsigned long long>(entry.d_tag));
      return "holds an unknown entry (tag " + std::string(tag) + ") at index " + std::to_string(i);
    }
    if (holds_an_address(entry.d_tag) && !loaded(entry.d_un.d_ptr))
      return "points outside the library's loaded segments (entry " + std::to_string(i) + ", tag " +
             std::to_string(entry.d_tag) + ")";
    if (entry.d_tag == DT_STRSZ) string_table_size = entry.d_un.d_val;
    ended = entry.d_tag == DT_NULL;
  }
  if (!ended) return "does not end (no DT_NULL entry)";
  const auto has = [&entries](std::int64_t tag) {
    for (const Elf64_Dyn& entry : entries) {
      if (entry.d_tag == tag) return true;
      if (entry.d_tag == DT_NULL) return false;
    }
    return false;
  };
  if (!has(DT_STRTAB) || !has(DT_SYMTAB)) return "lacks a string table or a symbol table (DT_STRTAB, DT_SYMTAB)";
  for (const Elf64_Dyn& entry : entries) {
    if (entry.d_tag == DT_NULL) break;
    if ((entry.d_tag == DT_NEEDED || entry.d_tag == DT_SONAME || entry.d_tag == DT_RPATH ||
         entry.d_tag == DT_RUNPATH) &&
        entry.d_un.d_val >= string_table_size)
      return "names a string beyond its string table (offset " + std::to_string(entry.d_un.d_val) + " of " +
             std::to_string(string_table_size) + " bytes)";
  }
  return {};
}

}  // namespace

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
  for (const Elf64_Phdr& segment : segments) {
    if (segment.p_type != PT_DYNAMIC) continue;
    if (beyond(segment.p_offset, segment.p_filesz))
      return "truncated: its dynamic section lies beyond the file's " + std::to_string(size) + " bytes";
    // The loader reads the section at its address, from the loaded segment that maps it: that must
    // be the bytes at p_offset, which are the ones checked here.
    bool mapped_from_offset = false;
    for (const Elf64_Phdr& load : segments)
      if (load.p_type == PT_LOAD && segment.p_vaddr >= load.p_vaddr && segment.p_vaddr - load.p_vaddr < load.p_filesz &&
          segment.p_vaddr - load.p_vaddr + load.p_offset == segment.p_offset)
        mapped_from_offset = true;
    if (!mapped_from_offset)
      return "corrupt: its dynamic section's address does not map to its file offset " +
             std::to_string(segment.p_offset);
    std::vector<Elf64_Dyn> entries(segment.p_filesz / sizeof(Elf64_Dyn));
    in.seekg(static_cast<std::streamoff>(segment.p_offset));
    if (!in.read(reinterpret_cast<char*>(entries.data()),
                 static_cast<std::streamsize>(entries.size() * sizeof(Elf64_Dyn))))
      return "truncated: cannot read its dynamic section";
    if (std::string problem = check_dynamic_section(entries, segments); !problem.empty())
      return "corrupt: its dynamic section " + problem;
  }
  return {};
}

}  // namespace strata
