// Name tables for the project's closed choices: one table per enum, read by the flag parser, the
// help text and the JSON report alike.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace common {

/// One value of a named enum and its spelling in flags and reports.
template <typename E>
struct EnumName {
  E value;
  const char* name;
};

/// An enum becomes named by declaring, in its own namespace, a function found by argument-dependent
/// lookup that returns its table:
///
///   enum class WorkUnit { kBatch, kSample };
///   inline constexpr EnumName<WorkUnit> kWorkUnitNames[] = {{WorkUnit::kBatch, "batch"}, ...};
///   constexpr const auto& enum_names(WorkUnit) { return kWorkUnitNames; }
///
/// Every value must appear exactly once; the first entry is listed first in help texts.
template <typename E, typename = void>
struct is_named_enum : std::false_type {};
template <typename E>
struct is_named_enum<E, std::void_t<decltype(enum_names(std::declval<E>()))>> : std::true_type {};
template <typename E>
inline constexpr bool is_named_enum_v = is_named_enum<E>::value;

/// The name of `value` ("?" for a value missing from the table, which a test of each table rules
/// out).
template <typename E, typename = std::enable_if_t<is_named_enum_v<E>>>
const char* to_string(E value) {
  for (const auto& entry : enum_names(value)) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

/// The value named `name`, or nullopt.
template <typename E, typename = std::enable_if_t<is_named_enum_v<E>>>
std::optional<E> parse_enum(std::string_view name) {
  for (const auto& entry : enum_names(E{})) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

/// Every name of E joined by `separator`, in table order ("batch|sample").
template <typename E, typename = std::enable_if_t<is_named_enum_v<E>>>
std::string enum_choices(std::string_view separator = "|") {
  std::string out;
  for (const auto& entry : enum_names(E{})) {
    if (!out.empty()) out += separator;
    out += entry.name;
  }
  return out;
}

}  // namespace common
