// Command-line plumbing shared by the executables: flag tables and their visitors, and typed flag
// parsing with messages that name the flag.
#pragma once

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "common/named_enum.h"
#include "lib/core/usage_error.h"

namespace workload {

/// options.parse(argc, argv), with cxxopts' own errors (an unknown flag, a missing value) as
/// UsageError. \throws UsageError.
cxxopts::ParseResult parse_command_line(cxxopts::Options& options, int argc,
                                        const char* const* argv);

/// The value of a boolean request flag declared by hand (--help, --version): false unless given,
/// true when given alone; read with given_boolean().
std::shared_ptr<cxxopts::Value> request_value();

/// The boolean `flag` (declared with DeclareFlags::boolean or as a string with implicit value
/// "true"): its value when given, `fallback` when not. \throws UsageError naming the flag.
bool given_boolean(const cxxopts::ParseResult& result, const std::string& flag,
                   bool fallback = false);

/// Typed access to parsed flags with "expected ..., got ..." messages naming the flag.
/// Numeric and enum flags are declared as strings so that bad values are reported by name.
class FlagReader {
 public:
  explicit FlagReader(const cxxopts::ParseResult& result) : result_(result) {}

  bool has(const std::string& flag) const { return result_.count(flag) > 0; }
  std::string string(const std::string& flag) const;
  /// Every value a repeatable flag was given, in order.
  std::vector<std::string> strings(const std::string& flag) const;
  std::int64_t integer(const std::string& flag, std::int64_t min, std::int64_t max) const;
  std::uint64_t unsigned_integer(const std::string& flag) const;
  double real(const std::string& flag, double min, double max) const;
  bool boolean(const std::string& flag) const;
  /// \throws UsageError when positional arguments were given that no flag takes.
  void reject_unmatched() const;

 private:
  const cxxopts::ParseResult& result_;
};

/// Parses a boolean spelled true/false, 1/0, yes/no, on/off. \throws UsageError naming `flag`.
bool parse_bool(const std::string& flag, const std::string& text);

/// \throws UsageError "--<flag>: expected an integer in [min, max], got <v>" when v is outside.
void check_integer_range(const std::string& flag, std::int64_t v, std::int64_t min,
                         std::int64_t max);
void check_real_range(const std::string& flag, double v, double min, double max);

/// The shortest decimal text that reads back as `v` ("0.1", "0.0001").
std::string shortest_text(double v);

// ---------------------------------------------------------------------------------------------
// Flag tables
//
// A flag table is a function template that names every flag of a settings struct once, with the
// field it sets, and hands each to a visitor:
//
//   template <class C, class V> void visit_my_flags(C& config, V&& v) {
//     v.integer({"steps", "Run", "captured steps"}, config.steps, 1, 1000000);
//     v.choice({"device", "Run", "where the model runs"}, config.device);  // a named enum
//   }
//
// The visitors below give one table its uses: declaring the flags to cxxopts (defaults shown are
// the struct's own), reading parsed values into the struct, checking a struct built in code
// against the same ranges, and writing the struct into a JSON report. Adding a flag is then one
// line in its table next to the field it sets. Visitor calls, per kind of flag:
//   text(info, std::string&)          a path or name; empty means none
//   integer(info, T&, min, max)       any integral T
//   real(info, double&, min, max)
//   integer/real(info, std::optional<T>&, min, max)
//                                     a value that may be absent: not given, the field stays
//                                     nullopt and its user applies a rule (the help text says
//                                     which); the report writes null
//   boolean(info, bool&)              --flag, --flag=true|false
//   choice(info, E&)                  E a named enum (data_pipeline/named_enum.h)
//   list(info, std::vector<T>&)       a repeatable flag; T has parse_list_item(text, T*) (throws
//                                     std::invalid_argument) and to_string(T), found by ADL

/// T, in a context that template argument deduction ignores (so `integer(info, int64_field, 1, 8)`
/// deduces T from the field alone).
template <typename T>
struct NonDeduced {
  using type = T;
};
template <typename T>
using non_deduced_t = typename NonDeduced<T>::type;

/// One flag: its name without dashes, its --help group, its help text and whether the report's
/// `config` holds it (as `name` with '-' replaced by '_').
struct FlagInfo {
  const char* name = nullptr;
  const char* group = nullptr;
  const char* help = nullptr;
  bool reported = true;
};

/// Declares each flag to cxxopts, as a string (so that bad values are reported by name), in its
/// group, with the visited value as the default shown in --help. A choice's help starts with its
/// names ("error|skip: ...").
class DeclareFlags {
 public:
  explicit DeclareFlags(cxxopts::Options& options) : options_(options) {}

  void text(const FlagInfo& f, const std::string& v) {
    auto value = cxxopts::value<std::string>();
    if (!v.empty()) value->default_value(v);
    add(f, f.help, value);
  }
  template <typename T>
  void integer(const FlagInfo& f, const T& v, non_deduced_t<T>, non_deduced_t<T>) {
    add(f, f.help, cxxopts::value<std::string>()->default_value(std::to_string(v)));
  }
  void real(const FlagInfo& f, const double& v, double, double) {
    add(f, f.help, cxxopts::value<std::string>()->default_value(shortest_text(v)));
  }
  // An optional flag shows no default: its help text says what not giving it means.
  template <typename T>
  void integer(const FlagInfo& f, const std::optional<T>&, non_deduced_t<T>, non_deduced_t<T>) {
    add(f, f.help, cxxopts::value<std::string>());
  }
  void real(const FlagInfo& f, const std::optional<double>&, double, double) {
    add(f, f.help, cxxopts::value<std::string>());
  }
  void boolean(const FlagInfo& f, const bool& v) {
    add(f, f.help,
        cxxopts::value<std::string>()->default_value(v ? "true" : "false")->implicit_value("true"));
  }
  template <typename E>
  void choice(const FlagInfo& f, const E& v) {
    add(f, common::enum_choices<E>() + ": " + f.help,
        cxxopts::value<std::string>()->default_value(common::to_string(v)));
  }
  template <typename T>
  void list(const FlagInfo& f, const std::vector<T>&) {
    add(f, f.help + std::string(" (repeatable)"), cxxopts::value<std::vector<std::string>>());
  }

 private:
  void add(const FlagInfo& f, const std::string& help,
           const std::shared_ptr<cxxopts::Value>& value) {
    options_.add_options(f.group)(f.name, help, value);
  }
  cxxopts::Options& options_;
};

/// Reads every flag given on the command line into the visited field, checking its range or
/// choices; fields of flags not given keep their values. \throws UsageError naming the flag.
class ReadFlags {
 public:
  explicit ReadFlags(const cxxopts::ParseResult& result) : flags_(result) {}

  /// The flags that were given, by name.
  const std::set<std::string>& given() const { return given_; }

  void text(const FlagInfo& f, std::string& v) {
    if (!take(f)) return;
    v = flags_.string(f.name);
    if (v.empty()) throw UsageError("--" + std::string(f.name) + ": expected a value, got ''");
  }
  template <typename T>
  void integer(const FlagInfo& f, T& v, non_deduced_t<T> min, non_deduced_t<T> max) {
    static_assert(std::is_integral_v<T>);
    if (!take(f)) return;
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == sizeof(std::uint64_t)) {
      v = flags_.unsigned_integer(f.name);
    } else {
      v = static_cast<T>(flags_.integer(f.name, min, max));
    }
  }
  void real(const FlagInfo& f, double& v, double min, double max) {
    if (take(f)) v = flags_.real(f.name, min, max);
  }
  template <typename T>
  void integer(const FlagInfo& f, std::optional<T>& v, non_deduced_t<T> min, non_deduced_t<T> max) {
    static_assert(std::is_integral_v<T> && std::is_signed_v<T>);
    if (take(f)) v = static_cast<T>(flags_.integer(f.name, min, max));
  }
  void real(const FlagInfo& f, std::optional<double>& v, double min, double max) {
    if (take(f)) v = flags_.real(f.name, min, max);
  }
  void boolean(const FlagInfo& f, bool& v) {
    if (take(f)) v = flags_.boolean(f.name);
  }
  template <typename E>
  void choice(const FlagInfo& f, E& v) {
    if (!take(f)) return;
    const std::string text = flags_.string(f.name);
    const auto parsed = common::parse_enum<E>(text);
    if (!parsed) {
      throw UsageError("--" + std::string(f.name) + ": expected " + common::enum_choices<E>() +
                       ", got '" + text + "'");
    }
    v = *parsed;
  }
  template <typename T>
  void list(const FlagInfo& f, std::vector<T>& v) {
    if (!take(f)) return;
    v.clear();
    for (const std::string& text : flags_.strings(f.name)) {
      try {
        v.push_back(parse_list_item(text, static_cast<T*>(nullptr)));
      } catch (const std::invalid_argument& e) {
        throw UsageError("--" + std::string(f.name) + ": " + e.what() + ", got '" + text + "'");
      }
    }
  }

 private:
  bool take(const FlagInfo& f) {
    if (!flags_.has(f.name)) return false;
    given_.insert(f.name);
    return true;
  }
  FlagReader flags_;
  std::set<std::string> given_;
};

/// Checks the values a struct holds against its table's ranges (for settings built in code, which
/// no parser has seen). \throws UsageError naming the flag.
class CheckFlagRanges {
 public:
  void text(const FlagInfo&, const std::string&) {}
  template <typename T>
  void integer(const FlagInfo& f, const T& v, non_deduced_t<T> min, non_deduced_t<T> max) {
    if constexpr (std::is_unsigned_v<T>) {
      if (v < min || v > max) {
        throw UsageError("--" + std::string(f.name) + ": expected an integer in [" +
                         std::to_string(min) + ", " + std::to_string(max) + "], got " +
                         std::to_string(v));
      }
    } else {
      check_integer_range(f.name, v, min, max);
    }
  }
  void real(const FlagInfo& f, const double& v, double min, double max) {
    check_real_range(f.name, v, min, max);
  }
  template <typename T>
  void integer(const FlagInfo& f, const std::optional<T>& v, non_deduced_t<T> min,
               non_deduced_t<T> max) {
    if (v) check_integer_range(f.name, *v, min, max);
  }
  void real(const FlagInfo& f, const std::optional<double>& v, double min, double max) {
    if (v) check_real_range(f.name, *v, min, max);
  }
  void boolean(const FlagInfo&, const bool&) {}
  template <typename E>
  void choice(const FlagInfo&, const E&) {}
  template <typename T>
  void list(const FlagInfo&, const std::vector<T>&) {}  // items: validate()'s business
};

/// Writes every reported flag's value into a JSON object: numbers and booleans as such, choices by
/// name, text as strings (empty for none).
class FlagsToJson {
 public:
  explicit FlagsToJson(nlohmann::ordered_json& out) : out_(out) {}

  void text(const FlagInfo& f, const std::string& v) { put(f, v); }
  template <typename T>
  void integer(const FlagInfo& f, const T& v, non_deduced_t<T>, non_deduced_t<T>) {
    put(f, v);
  }
  void real(const FlagInfo& f, const double& v, double, double) { put(f, v); }
  template <typename T>
  void integer(const FlagInfo& f, const std::optional<T>& v, non_deduced_t<T>, non_deduced_t<T>) {
    put(f, v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr));
  }
  void real(const FlagInfo& f, const std::optional<double>& v, double, double) {
    put(f, v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr));
  }
  void boolean(const FlagInfo& f, const bool& v) { put(f, v); }
  template <typename E>
  void choice(const FlagInfo& f, const E& v) {
    put(f, common::to_string(v));
  }
  template <typename T>
  void list(const FlagInfo& f, const std::vector<T>& v) {
    std::vector<std::string> items;
    items.reserve(v.size());
    for (const T& item : v) items.push_back(to_string(item));
    put(f, items);
  }

  /// "batch-size" -> "batch_size".
  static std::string key(const char* flag);

 private:
  template <typename T>
  void put(const FlagInfo& f, const T& v) {
    if (f.reported) out_[key(f.name)] = v;
  }
  nlohmann::ordered_json& out_;
};

}  // namespace workload
