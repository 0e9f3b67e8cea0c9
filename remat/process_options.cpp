// Changing a process option while the program runs: set_option on
// global_options() (core/options.h), which dtr_set_option of the C API also
// calls. This file is the one place that applies each option to the running
// library, as the option's setter would, and that refuses what cannot apply.
#include <algorithm>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/options.h"
#include "remat/lineage.h"
#include "remat/memory_snapshot.h"
#include "remat/runtime.h"

namespace dtr::remat {
namespace {

/// Throws DeviceError, naming the device and why, for the first entry of
/// `spec` whose device is not present (cuda:0 without a CUDA driver or
/// device). The environment's entries are only warned about at start-up
/// (unusable_budget_entries): one DTR_MEMORY_BUDGET may serve machines with
/// and without GPUs, whereas a program that sets a budget now means it.
void check_budget_devices(const MemoryBudgetSpec& spec) {
  for (const auto& [device, budget] : spec.per_device) {
    try {
      check_device(device);
    } catch (const DeviceError& e) {
      throw DeviceError(fmt::format("DTR_MEMORY_BUDGET: cannot set a budget for {}: {}; the budgets and the "
                                    "options are as they were",
                                    device.str(), e.what()));
    }
  }
}

/// Throws ValueError when `on` switches the CPU GEMM library while lineage
/// exists (docs/DESIGN.md, Options: Note [GEMM switch]).
void check_gemm_switch(bool on) {
  if (on == global_options().onednn_gemm) return;
  const int64_t nodes = live_node_count();
  if (nodes == 0) return;
  throw ValueError(fmt::format(
      "DTR_ONEDNN_GEMM: cannot switch the CPU's float32 GEMM from {} to {} while lineage exists ({} lineage "
      "node{}): a replay of a GEMM recorded before the switch would run the other library, whose results "
      "differ in the last bits, so a rematerialized tensor would not be bitwise the first (DTR_VERIFY "
      "would report a mismatch); set it in the environment or before the first op, or once no tensor "
      "with lineage is left",
      on ? "OpenBLAS" : "oneDNN", on ? "oneDNN" : "OpenBLAS", nodes, nodes == 1 ? "" : "s"));
}

void apply_process_option(std::string_view name, const Options& o) {
  if (name == "DTR_LOG") {
    set_log_level(o.log_level);
    return;
  }
  if (name == "DTR_ONEDNN_GEMM") {
    check_gemm_switch(o.onednn_gemm);
    return;  // read from global_options() at every GEMM
  }
  if (name == "DTR_COLLECTIVE_TIMEOUT") return;  // read by init_process_group and new_group
  if (name == "DTR_CUDA_SYNC") return;           // read by the CUDA backend at every kernel
  if (name == "DTR_PLAN") {
    throw ValueError(
        "DTR_PLAN records the whole run from its start, so it is read from the environment at start-up only");
  }
  if (name == "DTR_MEMORY_SNAPSHOT") {
    memory::set_snapshot_at_exit(o.memory_snapshot_path);
    return;
  }
  if (name == "DTR_MEMORY_BUDGET") check_budget_devices(o.memory_budget);
  Runtime& rt = Runtime::global();
  if (name == "DTR_HEURISTIC") rt.set_heuristic(o.heuristic);
  else if (name == "DTR_SAMPLE") rt.set_sample_mode(o.sample);
  else if (name == "DTR_MIN_EVICT_BYTES") rt.set_min_evict_bytes(o.min_evict_bytes);
  else if (name == "DTR_COST") rt.set_cost_model(o.cost);
  else if (name == "DTR_SWAP") rt.set_swap_mode(o.swap);
  else if (name == "DTR_VERIFY") rt.set_verify(o.verify);
  else if (name == "DTR_TRACE") rt.set_trace_path(o.trace_path);
  else if (name == "DTR_THRASH_LIMIT") rt.set_thrash_limit(o.thrash_limit);
  else if (name == "DTR_MEMORY_BUDGET") {
    const Device def = default_device();
    std::vector<Device> devices = rt.devices();
    if (std::find(devices.begin(), devices.end(), def) == devices.end()) devices.push_back(def);
    for (const Device& d : devices) {
      const MemoryBudget spec = o.memory_budget.for_device(d, d == def);
      rt.set_memory_budget(d, spec.resolve(backend(d).memory_bytes(d.index)));
    }
  } else {
    throw InternalError(fmt::format("set_option: no setter for {}", name));
  }
}

// Installed when the library loads; the pointer it sets is constant-initialized.
const bool g_installed = [] {
  set_process_option_applier(apply_process_option);
  return true;
}();

}  // namespace
}  // namespace dtr::remat
