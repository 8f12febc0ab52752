// torchrun's environment, read and checked, and the per-rank output naming
// (lib/distributed/launch_env.h).
#include "lib/distributed/launch_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "lib/core/usage_error.h"

namespace workload {

namespace {

class EnvReader {
 public:
  explicit EnvReader(const std::function<const char*(const char*)>& getenv) : getenv_(getenv) {}

  const char* raw(const char* name) const { return getenv_ ? getenv_(name) : std::getenv(name); }
  bool has(const char* name) const {
    const char* v = raw(name);
    return v && *v;
  }
  std::string text(const char* name, const std::string& needed_for) const {
    if (!has(name)) {
      throw UsageError(std::string(name) + ": required " + needed_for +
                       " (torchrun and scripts/launch_local.sh set it)");
    }
    return raw(name);
  }
  long integer(const char* name, long min, long max, const std::string& needed_for) const {
    const std::string v = text(name, needed_for);
    errno = 0;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || n < min || n > max) {
      throw UsageError(std::string(name) + ": expected an integer in [" + std::to_string(min) +
                       ", " + std::to_string(max) + "], got '" + v + "'");
    }
    return n;
  }

 private:
  const std::function<const char*(const char*)>& getenv_;
};

}  // namespace

std::optional<LaunchEnv> read_launch_env(const std::function<const char*(const char*)>& getenv) {
  const EnvReader env(getenv);
  if (!env.has("RANK") && !env.has("WORLD_SIZE") && !env.has("LOCAL_RANK")) return std::nullopt;
  const std::string why = "in a distributed run (RANK, WORLD_SIZE or LOCAL_RANK is set)";
  LaunchEnv d;
  d.world_size = static_cast<int>(env.integer("WORLD_SIZE", 1, 1 << 20, why));
  d.rank = static_cast<int>(env.integer("RANK", 0, d.world_size - 1, why));
  d.local_rank = static_cast<int>(env.integer("LOCAL_RANK", 0, d.world_size - 1, why));
  d.local_world_size = env.has("LOCAL_WORLD_SIZE")
                           ? static_cast<int>(env.integer("LOCAL_WORLD_SIZE", 1, d.world_size, why))
                           : 1;
  if (d.local_rank >= d.local_world_size && env.has("LOCAL_WORLD_SIZE")) {
    throw UsageError("LOCAL_RANK: expected an integer below LOCAL_WORLD_SIZE (" +
                     std::to_string(d.local_world_size) + "), got " + std::to_string(d.local_rank));
  }
  d.master_addr = env.text("MASTER_ADDR", why);
  d.master_port = static_cast<int>(env.integer("MASTER_PORT", 1, 65535, why));
  if (env.has("TORCHELASTIC_USE_AGENT_STORE")) {
    const std::string v = env.raw("TORCHELASTIC_USE_AGENT_STORE");
    d.agent_store = v == "True" || v == "true" || v == "1";
  }
  if (env.has("TORCHELASTIC_RESTART_COUNT")) {
    d.restart_count = static_cast<int>(env.integer("TORCHELASTIC_RESTART_COUNT", 0, INT_MAX, why));
  }
  return d;
}

std::string rank_output_path(const std::string& path, int rank) {
  const std::filesystem::path p(path);
  const std::string suffix = ".rank" + std::to_string(rank);
  if (!p.has_extension()) return path + suffix;
  return (p.parent_path() / (p.stem().string() + suffix + p.extension().string())).string();
}

}  // namespace workload
