// The spellings of the library's vocabulary: rounding modes, tininess, NaN
// policies, formats, operations, rounding and special reasons. One table per
// enum, each row holding its enumerator, so that a static_assert ties the
// table to the enum: a reordered or inserted enumerator fails the build instead
// of mislabelling. (One appended after the last is not seen here; -Wswitch sees
// it in the switches of round.hpp and trace.hpp, and its row goes here.) The
// command, the Python binding and the renderers look names up here and never
// spell them again.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "environment.hpp"
#include "format.hpp"
#include "observer.hpp"

namespace bitexact {

// Every spelling of one value: the enumerator's name first, then the short
// forms and the names other tools use (TestFloat's minMag, near_maxMag; ML
// frameworks' float8_e4m3fn). Unused places are empty.
template <class Setting, std::size_t Spellings = 4>
struct setting_spelling {
  Setting value;
  std::array<std::string_view, Spellings> names;
};

// One enumerator's name (or description) alone.
template <class Enum>
struct enum_name {
  Enum value;
  std::string_view name;
};

// Whether row i of a table holds the enumerator of value i, for every row, and
// the rows reach the enum's last enumerator: what lets name_of index a table.
template <class Enum, class Table>
constexpr bool indexed_by_value(const Table& table, Enum last) {
  for (std::size_t i = 0; i < table.size(); ++i)
    if (static_cast<std::size_t>(table[i].value) != i) return false;
  return table.size() == static_cast<std::size_t>(last) + 1;
}

// The name in `value`'s row (its first spelling) of a table that indexed_by_value holds; "?" beyond it.
template <class Table, class Enum>
constexpr std::string_view name_in(const Table& table, Enum value) {
  const auto index = static_cast<std::size_t>(value);
  if (index >= table.size()) return "?";
  if constexpr (requires { table[index].names; }) return table[index].names[0];
  else return table[index].name;
}

// ---------------------------------------------------------------------------
// The environment's settings.

inline constexpr std::array<setting_spelling<rounding_mode>, 7> rounding_spellings{{
    {rounding_mode::nearest_even, {"nearest_even", "rne", "near_even", "nearest"}},
    {rounding_mode::nearest_away, {"nearest_away", "rna", "near_maxMag", ""}},
    {rounding_mode::toward_zero, {"toward_zero", "rtz", "minMag", "zero"}},
    {rounding_mode::upward, {"upward", "rup", "max", "up"}},
    {rounding_mode::downward, {"downward", "rdn", "min", "down"}},
    {rounding_mode::to_odd, {"to_odd", "odd", "rod", ""}},
    {rounding_mode::stochastic, {"stochastic", "sr", "", ""}},
}};
static_assert(indexed_by_value(rounding_spellings, rounding_mode::stochastic),
              "rounding_spellings: one row per rounding_mode, in the enum's order");

// What each mode does, in words (the trace's "rounding" line).
inline constexpr std::array<enum_name<rounding_mode>, 7> rounding_descriptions{{
    {rounding_mode::nearest_even, "round to nearest, ties to even"},
    {rounding_mode::nearest_away, "round to nearest, ties away from zero"},
    {rounding_mode::toward_zero, "round toward zero"},
    {rounding_mode::upward, "round toward +infinity"},
    {rounding_mode::downward, "round toward -infinity"},
    {rounding_mode::to_odd, "round to odd"},
    {rounding_mode::stochastic, "stochastic rounding"},
}};
static_assert(indexed_by_value(rounding_descriptions, rounding_mode::stochastic),
              "rounding_descriptions: one row per rounding_mode, in the enum's order");

inline constexpr std::array<setting_spelling<tininess>, 2> tininess_spellings{{
    {tininess::before_rounding, {"before_rounding", "before", "", ""}},
    {tininess::after_rounding, {"after_rounding", "after", "", ""}},
}};
static_assert(indexed_by_value(tininess_spellings, tininess::after_rounding),
              "tininess_spellings: one row per tininess, in the enum's order");

inline constexpr std::array<setting_spelling<nan_policy>, 2> nan_policy_spellings{{
    {nan_policy::ieee_propagate, {"ieee_propagate", "ieee", "", ""}},
    {nan_policy::canonical, {"canonical", "cuda", "", ""}},
}};
static_assert(indexed_by_value(nan_policy_spellings, nan_policy::canonical),
              "nan_policy_spellings: one row per nan_policy, in the enum's order");

// A setting's default, which the lists of names put first.
constexpr rounding_mode default_setting(rounding_mode) { return environment{}.rounding; }
constexpr tininess default_setting(tininess) { return environment{}.tiny; }
constexpr nan_policy default_setting(nan_policy) { return environment{}.nans; }

constexpr std::string_view name_of(rounding_mode mode) { return name_in(rounding_spellings, mode); }
constexpr std::string_view name_of(tininess t) { return name_in(tininess_spellings, t); }
constexpr std::string_view name_of(nan_policy p) { return name_in(nan_policy_spellings, p); }
constexpr std::string_view description_of(rounding_mode mode) { return name_in(rounding_descriptions, mode); }

// The value that any of its spellings names, or none.
template <class Setting, std::size_t N, std::size_t Spellings>
constexpr std::optional<Setting> setting_from_name(const std::array<setting_spelling<Setting, Spellings>, N>& table,
                                                   std::string_view name) {
  for (const setting_spelling<Setting, Spellings>& row : table)
    for (const std::string_view spelling : row.names)
      if (!spelling.empty() && spelling == name) return row.value;
  return std::nullopt;
}

constexpr std::optional<rounding_mode> rounding_mode_from_name(std::string_view name) {
  return setting_from_name(rounding_spellings, name);
}

// Every value with its other spellings, the default first, for error messages:
// "nearest_even (or rne, near_even, nearest), nearest_away (or rna, near_maxMag), ...".
template <class Setting, std::size_t N, std::size_t Spellings>
std::string setting_names_hint(const std::array<setting_spelling<Setting, Spellings>, N>& table) {
  const auto listed = [&](const setting_spelling<Setting, Spellings>& row) {
    std::string others;
    for (std::size_t i = 1; i < row.names.size(); ++i)
      if (!row.names[i].empty()) others += (others.empty() ? "" : ", ") + std::string(row.names[i]);
    return std::string(row.names[0]) + (others.empty() ? "" : " (or " + others + ")");
  };
  std::string text;
  for (const setting_spelling<Setting, Spellings>& row : table)
    if (row.value == default_setting(Setting{})) text = listed(row);
  for (const setting_spelling<Setting, Spellings>& row : table)
    if (row.value != default_setting(Setting{})) text += ", " + listed(row);
  return text;
}

inline std::string rounding_names_hint() { return setting_names_hint(rounding_spellings); }

// ---------------------------------------------------------------------------
// Formats: the named ones, each with this library's name first, then the
// spellings TestFloat and ML frameworks use. A format is not an enum: this
// table is the list of named formats (visit_format dispatches over it).

inline constexpr std::array<setting_spelling<format, 5>, 6> format_spellings{{
    {fp32, {"fp32", "f32", "float32", "binary32", ""}},
    {bf16, {"bf16", "bfloat16", "", "", ""}},
    {fp16, {"fp16", "f16", "float16", "half", "binary16"}},
    {tf32, {"tf32", "tfloat32", "", "", ""}},
    {e5m2, {"e5m2", "fp8_e5m2", "float8_e5m2", "", ""}},
    {e4m3, {"e4m3", "fp8_e4m3", "float8_e4m3", "e4m3fn", "float8_e4m3fn"}},
}};

constexpr std::string_view name_of(format f) {
  for (const auto& row : format_spellings)
    if (row.value == f) return row.names[0];
  return "custom";
}

constexpr std::optional<format> format_from_name(std::string_view name) {
  return setting_from_name(format_spellings, name);
}

// "fp32, bf16, fp16, tf32, e5m2, e4m3".
inline std::string format_names_hint() {
  std::string text;
  for (const auto& row : format_spellings) text += (text.empty() ? "" : ", ") + std::string(row.names[0]);
  return text;
}

// ---------------------------------------------------------------------------
// The vocabulary of events (observer.hpp), as traces and their JSON name it.

inline constexpr std::array<enum_name<operation>, 9> operation_names{{
    {operation::add, "add"},
    {operation::sub, "sub"},
    {operation::mul, "mul"},
    {operation::fma, "fma"},
    {operation::div, "div"},
    {operation::sqrt, "sqrt"},
    {operation::convert, "convert"},
    {operation::from_integer, "from_integer"},
    {operation::to_integer, "to_integer"},
}};
static_assert(indexed_by_value(operation_names, operation::to_integer),
              "operation_names: one row per operation, in the enum's order");

inline constexpr std::array<enum_name<rounding_reason>, 13> rounding_reason_names{{
    {rounding_reason::exact, "exact"},
    {rounding_reason::below_half, "below_half"},
    {rounding_reason::above_half, "above_half"},
    {rounding_reason::tie_to_even, "tie_to_even"},
    {rounding_reason::tie_stays_even, "tie_stays_even"},
    {rounding_reason::tie_away, "tie_away"},
    {rounding_reason::toward_zero, "toward_zero"},
    {rounding_reason::directed_up, "directed_up"},
    {rounding_reason::directed_truncate, "directed_truncate"},
    {rounding_reason::odd_bit_set, "odd_bit_set"},
    {rounding_reason::odd_already, "odd_already"},
    {rounding_reason::stochastic_up, "stochastic_up"},
    {rounding_reason::stochastic_down, "stochastic_down"},
}};
static_assert(indexed_by_value(rounding_reason_names, rounding_reason::stochastic_down),
              "rounding_reason_names: one row per rounding_reason, in the enum's order");

inline constexpr std::array<enum_name<special_reason>, 8> special_reason_names{{
    {special_reason::nan_operand, "nan_operand"},
    {special_reason::invalid_operation, "invalid_operation"},
    {special_reason::infinity_operand, "infinity_operand"},
    {special_reason::division_by_zero, "division_by_zero"},
    {special_reason::zero_result, "zero_result"},
    {special_reason::overflow, "overflow"},
    {special_reason::flushed_to_zero, "flushed_to_zero"},
    {special_reason::out_of_range_integer, "out_of_range_integer"},
}};
static_assert(indexed_by_value(special_reason_names, special_reason::out_of_range_integer),
              "special_reason_names: one row per special_reason, in the enum's order");

constexpr std::string_view name_of(operation op) { return name_in(operation_names, op); }
constexpr std::string_view name_of(rounding_reason r) { return name_in(rounding_reason_names, r); }
constexpr std::string_view name_of(special_reason r) { return name_in(special_reason_names, r); }

}  // namespace bitexact
