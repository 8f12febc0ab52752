// The ranks' stop agreement (lib/distributed/stop_agreement.h).
#include "lib/distributed/stop_agreement.h"

#include <cerrno>
#include <cstdlib>

#include "lib/core/stop_request.h"

namespace workload {

std::string encode(const StopProposal& p) {
  return std::to_string(p.step) + "|" + std::to_string(p.rank) + "|" + std::to_string(p.signal);
}

std::optional<StopProposal> decode_stop_proposal(const std::string& text) {
  StopProposal p;
  const char* at = text.c_str();
  char* end = nullptr;
  errno = 0;
  p.step = std::strtoll(at, &end, 10);
  if (end == at || *end != '|') return std::nullopt;
  at = end + 1;
  p.rank = static_cast<int>(std::strtol(at, &end, 10));
  if (end == at || *end != '|') return std::nullopt;
  at = end + 1;
  p.signal = static_cast<int>(std::strtol(at, &end, 10));
  if (end == at || *end != '\0' || errno == ERANGE) return std::nullopt;
  return p;
}

std::string describe(const StopProposal& p) {
  return "rank " + std::to_string(p.rank) + ": " + signal_name(p.signal);
}

}  // namespace workload
