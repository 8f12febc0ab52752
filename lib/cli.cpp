// Command-line plumbing shared by the executables: typed flag parsing and exit-code policy.
#include "lib/cli.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "data_pipeline/data_error.h"

namespace workload {

namespace {
#if CXXOPTS__VERSION_MAJOR >= 3
using CxxoptsError = cxxopts::exceptions::exception;
#else
using CxxoptsError = cxxopts::OptionException;
#endif
}  // namespace

void init_torch_logging(const char* argv0) {
  // Severities as glog and c10 number them: INFO 0, WARNING 1, ERROR 2, FATAL 3.
  int level = 3;
  if (const char* env = std::getenv("TORCH_CPP_LOG_LEVEL")) {
    const std::string name = env;
    const char* names[] = {"INFO", "WARNING", "ERROR", "FATAL"};
    for (int i = 0; i < 4; ++i) {
      if (name == names[i]) level = i;
    }
  }
#if defined(C10_USE_GLOG)
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = level;
  if (!google::IsGoogleLoggingInitialized()) google::InitGoogleLogging(argv0);
#else
  static_cast<void>(argv0);
  ::FLAGS_caffe2_log_level = level;
#endif
}

int run_main(const std::string& program, const std::function<int()>& body,
             const std::string& who_arg) {
  const std::string& who = who_arg.empty() ? program : who_arg;
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << who << ": " << e.what() << "\nTry '" << program << " --help'.\n";
    return 2;
  } catch (const CxxoptsError& e) {
    std::cerr << who << ": " << e.what() << "\nTry '" << program << " --help'.\n";
    return 2;
  } catch (const data_pipeline::DataError& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return 1;
  } catch (const c10::Error& e) {
    // LibTorch's messages carry a C++ backtrace; the user needs the first line.
    std::cerr << who << ": error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return 1;
  }
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
