#pragma once
// What the host lends a plugin: logging, the model's shape, and the backend's op table (so an
// optimizer plugin runs the same AdamW the engine is tested with, on whatever device the tensors
// live, without linking against core).
#include <cstdint>
#include <string_view>

#include "strata/kernel.hpp"
#include "strata/ops.hpp"
#include "strata/plugin_memory.hpp"

namespace strata {

enum class LogLevel : std::uint8_t { debug, info, warn, error };

// What a host offers that a plugin may probe before it uses it (HostServices::has, HookContext::has):
// services that depend on the run, and those later minors append (a host answers false for an
// enumerator newer than itself, so a plugin that stamps an older minor runs there too).
//   memory:            HostServices::memory(), from the first hook on (not in a constructor)
//   disk_tier:         the run keeps a disk tier ([device] disk_path): HookContext::evict_to_disk,
//                      read_from_disk_async and write_to_disk_async
//   update_on_host:    offloaded updates run on the host's cores for optimizers that allow it
//                      (Optimizer::can_update_on_host)
//   activation_codecs: saved activations go through the strategies' codecs
//                      (MemoryStrategy::activation_codec)
enum class Service : std::uint16_t { memory, disk_tier, update_on_host, activation_codecs, count };

constexpr std::string_view service_name(Service service) noexcept {
  switch (service) {
    case Service::memory: return "memory";
    case Service::disk_tier: return "disk_tier";
    case Service::update_on_host: return "update_on_host";
    case Service::activation_codecs: return "activation_codecs";
    case Service::count: break;
  }
  return "unknown";
}

// The model's shape as the manifest (or config.json) gives it.
struct ModelInfo {
  std::string_view arch;  // "gpt2", "llama", "qwen2"
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int d_model = 0;
  int vocab = 0;
  int seq_len = 0;
  std::int64_t parameter_count = 0;
  int d_ff = 0;                  // the MLP's hidden width (GPT-2: 4 d_model)
  int head_dim = 0;              // per attention head (d_model / n_head unless the family sets its own)
  int padded_vocab = 0;          // the token table's rows in memory: vocab rounded up for the LM head's chunks
  int window = 0;                // a sliding attention window (0: none)
  bool tied_embeddings = false;  // the LM head multiplies by the token table
  const void* reserved[4] = {};  // zero; room to grow within a major version
};

class HostServices {
 public:
  virtual ~HostServices() = default;
  virtual void log(LogLevel level, std::string_view message) noexcept = 0;
  virtual const ModelInfo& model() const noexcept = 0;
  // The op table of the backend the run uses. Valid from the first step on (plugins are created
  // before the backend, so a constructor must not call it). While the host updates rows that all
  // live in host memory for an optimizer that allows it (Optimizer::can_update_on_host, 9.10), it
  // is the backend's host op table: the same bits, computed by the host's cores instead of across
  // the bus, and its backend() is "cpu", so a plugin with its own kernels runs its CPU kernel then.
  // Ask for it at each use: do not keep it across steps.
  virtual Ops& ops() noexcept = 0;
  // Where the run computes, for a plugin that brings its own kernels: the manifest's device.kind
  // while plugins are created (no device index or stream yet: a constructor refuses a backend it
  // has no kernels for), the backend's device and compute stream from the first step on.
  virtual KernelTarget target() const noexcept = 0;
  // Memory and copies accounted under this plugin's name (strata/plugin_memory.hpp), from the first
  // hook on (an optimizer: from its first step; has(Service::memory) says so). Throws
  // std::logic_error before then.
  virtual PluginMemory& memory() = 0;
  // True while `strata plan`'s dry run drives the step. Memory is reserved, not computed on, and no
  // value matters; the op table computes nothing. A plugin whose own kernel computes on its tensors
  // may skip that work, allocating what it would allocate, so that planning costs what the op
  // table's dry ops cost.
  virtual bool planning() const noexcept { return false; }
  // Whether this host offers `service` now (strata/abi.hpp, the version rule): false for a service
  // it does not know.
  virtual bool has(Service service) const noexcept = 0;
};

}  // namespace strata
