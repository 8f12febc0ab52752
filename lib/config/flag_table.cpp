// Command-line plumbing shared by the executables (lib/config/flag_table.h).
#include "lib/config/flag_table.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace workload {

namespace {
#if CXXOPTS__VERSION_MAJOR >= 3
using CxxoptsError = cxxopts::exceptions::exception;
#else
using CxxoptsError = cxxopts::OptionException;
#endif
}  // namespace

cxxopts::ParseResult parse_command_line(cxxopts::Options& options, int argc,
                                        const char* const* argv) {
  // cxxopts wants mutable argv.
  std::vector<std::string> storage(argv, argv + argc);
  std::vector<char*> args;
  args.reserve(storage.size());
  for (auto& arg : storage) args.push_back(arg.data());
  int n = static_cast<int>(args.size());
  char** pargv = args.data();
  try {
    return options.parse(n, pargv);
  } catch (const CxxoptsError& e) {
    throw UsageError(e.what());
  }
}

std::shared_ptr<cxxopts::Value> request_value() {
  return cxxopts::value<std::string>()->default_value("false")->implicit_value("true");
}

bool given_boolean(const cxxopts::ParseResult& result, const std::string& flag, bool fallback) {
  const FlagReader flags(result);
  return flags.has(flag) ? flags.boolean(flag) : fallback;
}

std::string FlagReader::string(const std::string& flag) const {
  return result_[flag].as<std::string>();
}

std::vector<std::string> FlagReader::strings(const std::string& flag) const {
  return result_[flag].as<std::vector<std::string>>();
}

void check_integer_range(const std::string& flag, std::int64_t v, std::int64_t min,
                         std::int64_t max) {
  if (v >= min && v <= max) return;
  const std::string range = max == INT64_MAX
                                ? ">= " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  throw UsageError("--" + flag + ": expected an integer " + range + ", got " + std::to_string(v));
}

void check_real_range(const std::string& flag, double v, double min, double max) {
  if (std::isfinite(v) && v >= min && v <= max) return;
  throw UsageError("--" + flag + ": expected a number in [" + shortest_text(min) + ", " +
                   shortest_text(max) + "], got " + shortest_text(v));
}

std::string shortest_text(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string FlagsToJson::key(const char* flag) {
  std::string k(flag);
  for (char& ch : k) {
    if (ch == '-') ch = '_';
  }
  return k;
}

std::int64_t FlagReader::integer(const std::string& flag, std::int64_t min,
                                 std::int64_t max) const {
  const std::string text = string(flag);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError("--" + flag + ": expected an integer, got '" + text + "'");
  }
  check_integer_range(flag, v, min, max);
  return v;
}

std::uint64_t FlagReader::unsigned_integer(const std::string& flag) const {
  const std::string text = string(flag);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE) {
    throw UsageError("--" + flag + ": expected a non-negative integer, got '" + text + "'");
  }
  return v;
}

double FlagReader::real(const std::string& flag, double min, double max) const {
  const std::string text = string(flag);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    throw UsageError("--" + flag + ": expected a number, got '" + text + "'");
  }
  check_real_range(flag, v, min, max);
  return v;
}

bool parse_bool(const std::string& flag, const std::string& text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  throw UsageError("--" + flag + ": expected true or false, got '" + text + "'");
}

bool FlagReader::boolean(const std::string& flag) const { return parse_bool(flag, string(flag)); }

void FlagReader::reject_unmatched() const {
  const auto& extra = result_.unmatched();
  if (!extra.empty()) {
    throw UsageError("unexpected argument '" + extra.front() +
                     "' (flags take the form --name=value)");
  }
}

}  // namespace workload
