// Command-line plumbing shared by the executables: typed flag parsing and exit-code policy.
#pragma once

#include <cxxopts.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace workload {

/// A mistake in the command line. `main` prints it with a hint and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

/// Runs `body` and maps what escapes it to the project's exit codes: UsageError and cxxopts
/// errors print "<program>: <message>" plus a --help hint and return 2; DataError and every other
/// exception print "<program>: error: <message>" on one line and return 1.
int run_main(const std::string& program, const std::function<int()>& body);

/// Typed access to parsed flags with "expected ..., got ..." messages naming the flag.
/// Numeric and enum flags are declared as strings so that bad values are reported by name.
class FlagReader {
 public:
  explicit FlagReader(const cxxopts::ParseResult& result) : result_(result) {}

  bool has(const std::string& flag) const { return result_.count(flag) > 0; }
  std::string string(const std::string& flag) const;
  std::int64_t integer(const std::string& flag, std::int64_t min, std::int64_t max) const;
  std::uint64_t unsigned_integer(const std::string& flag) const;
  double real(const std::string& flag, double min, double max) const;
  bool boolean(const std::string& flag) const;
  /// The flag's value, which must be one of `choices`.
  std::string choice(const std::string& flag, const std::vector<std::string>& choices) const;
  /// \throws UsageError when positional arguments were given that no flag takes.
  void reject_unmatched() const;

 private:
  const cxxopts::ParseResult& result_;
};

/// Parses a boolean spelled true/false, 1/0, yes/no, on/off. \throws UsageError naming `flag`.
bool parse_bool(const std::string& flag, const std::string& text);

}  // namespace workload
