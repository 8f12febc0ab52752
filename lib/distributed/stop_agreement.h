// The ranks' agreement to stop together at a step boundary: what a rank proposes through the store,
// with its one encoder and decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace workload {

/// A rank asked to stop proposes to stop before step `next + kStopMargin`, where `next` is the step
/// it is about to start (warm-up and captured steps counted together). Ranks are never more than a
/// step or two apart (each step's collectives couple them), so every rank sees the proposal before
/// it reaches that step.
inline constexpr std::int64_t kStopMargin = 3;

/// A proposal, as the store's `stop` key holds it; the first one written wins.
struct StopProposal {
  std::int64_t step = 0;  ///< every rank stops before this step
  int rank = -1;          ///< who proposed
  int signal = 0;         ///< the signal it was asked to stop for (0: a request without one)
  friend bool operator==(const StopProposal& a, const StopProposal& b) {
    return a.step == b.step && a.rank == b.rank && a.signal == b.signal;
  }
};

/// "<step>|<rank>|<signal>", and back (nullopt for a value that is not one).
std::string encode(const StopProposal& proposal);
std::optional<StopProposal> decode_stop_proposal(const std::string& text);

/// Who proposed and why, for the report and the summary: "rank 1: SIGTERM".
std::string describe(const StopProposal& proposal);

}  // namespace workload
