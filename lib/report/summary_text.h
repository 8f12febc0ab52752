// What train_resnet50 prints: the lines before the run and the summary after it, pure functions of
// the run's record.
#pragma once

#include <string>
#include <vector>

#include "lib/report/run_facts.h"

namespace workload {

/// The lines printed before the first step: the run's shape (device, batch, steps, input), the
/// experiment settings beyond the article's, the learning-rate schedule (train mode), the rank, and
/// one "note:" line per notice; each line
/// starts with `prefix` ("[rank 1] " in a distributed run) where a rank's output interleaves with
/// the others'. `facts.result` is not read.
std::string format_banner(const RunFacts& facts, const std::vector<std::string>& notices,
                          const std::string& prefix);

/// One step's progress line: "[step  3/8] batch_wait ... | h2d_submit ... | step ... ms", after
/// `prefix`; `warmup_total` and `steps_total` are the run's counts of each kind.
std::string format_step(const std::string& prefix, const StepRecord& record, int warmup_total,
                        int steps_total);

/// --epochs: one epoch's line, "[epoch  3/10] loss 3.2104 | top-1 12.34% top-5 40.10% (eval
/// loss 3.1002, 1.2 s) | 2950.1 images/s | 14.2 s | ETA 1m40s", after `prefix`; `epochs_total`
/// the run's, `eta_s` the time its remaining epochs should take (< 0: none shown).
std::string format_epoch(const std::string& prefix, const EpochRecord& record, int epochs_total,
                         double eta_s);

/// "1h02m", "4m05s", "12.3s".
std::string format_duration(double seconds);

/// The human-readable summary printed at the end of a run.
std::string format_summary(const RunFacts& facts);

}  // namespace workload
