// The run's JSON report, a pure function of the run's record (lib/report/run_facts.h), and where it
// is written.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "lib/report/run_facts.h"

namespace workload {

/// The resolved configuration as the report's `config` object: one key per flag of
/// lib/config/train_flags.h, named as the flag with '_' for '-'.
nlohmann::ordered_json config_json(const TrainConfig& config);

/// The report of `facts`: program, version, config, environment, model, loader, gpu_decode,
/// lr_schedule (train mode), capture, steps, warmup, summary, skipped_images, loss_after_drain,
/// interrupted and dist, each where the facts hold it. A partial record (`facts.partial`: the
/// watchdog's last resort) has no model, steps, summary or loss, and says why under `partial`.
/// Reads nothing but `facts`.
nlohmann::ordered_json report_json(const RunFacts& facts);

/// --epochs: one epoch's record as the report's `training.epochs` holds it (and a checkpoint
/// keeps it), and back; fields missing from the JSON take their defaults.
nlohmann::ordered_json epoch_json(const EpochRecord& epoch);
EpochRecord epoch_from_json(const nlohmann::ordered_json& json);

/// Writes `report` to `path` (lib/core/output_file.h: a symlink followed, a regular file replaced
/// atomically, a character device written in place, nothing else ever replaced).
/// \throws std::runtime_error naming --report and the path when it cannot be written.
void write_report(const std::string& path, const nlohmann::ordered_json& report);

/// "0x" followed by 16 lower-case hex digits.
std::string hex64(std::uint64_t v);

}  // namespace workload
