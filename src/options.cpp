// The command table's lists, the reading of options from their tables, the parsers of their values, and the
// environment options shared by `trace` and `eval`.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include <bitexact/core/names.hpp>
#include <bitexact/trace/parse.hpp>

#include "cli.hpp"

namespace bitexact::cli {

const command* find_command(std::span<const command> table, std::string_view name) {
  for (const command& c : table)
    if (c.name == name) return &c;
  return nullptr;
}

std::string names_of(std::span<const command> table) {
  std::string names;
  for (std::size_t i = 0; i < table.size(); ++i)
    names += (i == 0 ? "" : i + 1 == table.size() ? " or " : ", ") + std::string(table[i].name);
  return names;
}

namespace {

// The option that `arg` gives, as `spelling` or `spelling=VALUE`; none when no row has its spelling.
struct option_given {
  const option* row = nullptr;
  std::string_view spelling;
};

option_given find_option(const std::vector<option>& options, std::string_view arg) {
  for (const option& o : options)
    for (const std::string_view s : split_list(o.spellings, ' '))
      if (arg == s || (arg.starts_with(s) && arg[s.size()] == '=')) return {&o, s};
  return {};
}

// Rows of two columns, as --help lists commands and options: each label, then its text from one column on,
// continuation lines too; a label wider than `widest` has its text two spaces after it.
std::string two_columns(const std::vector<std::pair<std::string, std::string_view>>& rows, std::size_t widest) {
  std::size_t column = 0;
  for (const auto& row : rows)
    if (row.first.size() <= widest) column = std::max(column, row.first.size());
  column += 4;
  std::string out;
  for (const auto& [label, text] : rows) {
    out += "  " + label;
    std::size_t width = label.size() + 2;
    for (std::string_view rest = text;;) {
      const std::size_t end = rest.find('\n');
      out.append(width + 2 > column ? 2 : column - width, ' ').append(rest.substr(0, end)) += '\n';
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
      width = 0;
    }
  }
  return out;
}

}  // namespace

std::string command_list(std::span<const command> table) {
  std::vector<std::pair<std::string, std::string_view>> rows;
  for (const command& c : table) {
    for (const command& sub : c.subcommands) rows.emplace_back(std::string(c.name) + " " + std::string(sub.name), sub.summary);
    if (c.subcommands.empty())
      rows.emplace_back(std::string(c.name) + (c.operands.empty() ? "" : " ") + std::string(c.operands), c.summary);
  }
  return two_columns(rows, 22);
}

arguments read_options(const arguments& args, std::string_view command, const std::vector<option>& options,
                       std::string_view option_start) {
  const std::string context(command);
  arguments others;
  std::vector<std::string_view> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto [row, spelling] = find_option(options, args[i]);
    if (!row) {
      if (args[i].size() > option_start.size() && args[i].starts_with(option_start))
        fail(context + ": unknown option " + quoted_input(args[i]) + "; see bitexact " + context + " --help");
      others.push_back(args[i]);
      continue;
    }
    const std::string_view key = row->once.empty() ? split_list(row->spellings, ' ').front() : row->once;
    if (std::find(given.begin(), given.end(), key) != given.end())
      fail(context + ": " + std::string(key) + " is given twice; give each option once");
    given.push_back(key);
    // A flag's setter is given its spelling; an option's, its values: after '=', then the next arguments.
    arguments values;
    if (row->placeholder.empty()) {
      if (args[i] != spelling) fail(context + ": " + std::string(spelling) + " takes no value; write it alone");
      values.push_back(spelling);
    } else {
      if (args[i] != spelling) values.push_back(args[i].substr(spelling.size() + 1));
      const auto wanted = static_cast<std::size_t>(std::count(row->placeholder.begin(), row->placeholder.end(), ' ') + 1);
      while (values.size() < wanted) {
        if (++i == args.size())
          fail(context + ": " + std::string(spelling) +
               (wanted == 1 ? " needs a value" : fmt::format(" needs {} values, {}", wanted, row->placeholder)));
        values.push_back(args[i]);
      }
    }
    for (const std::string_view value : values) {
      try {
        row->set(value);
      } catch (const bad_value& error) {
        fail(context + ": " + std::string(spelling) + " " + error.message);
      }
    }
  }
  return others;
}

void read_only_options(const arguments& args, std::string_view command, const std::vector<option>& options) {
  const arguments others = read_options(args, command, options);
  if (!others.empty())
    fail(std::string(command) + ": unexpected argument " + quoted_input(others.front()) +
         "; it takes options only (see bitexact " + std::string(command) + " --help)");
}

int print_help(std::string_view help, const std::vector<option>& options) {
  std::vector<std::pair<std::string, std::string_view>> rows;
  for (const option& o : options) {
    if (o.help.empty()) continue;
    std::string label;
    for (const std::string_view s : split_list(o.spellings, ' ')) label += (label.empty() ? "" : ", ") + std::string(s);
    rows.emplace_back(label + (o.placeholder.empty() ? "" : " ") + std::string(o.placeholder), o.help);
  }
  std::string text(help);
  const std::size_t at = text.find("{options}\n");
  if (at != std::string::npos)
    text.replace(at, 10, two_columns(rows, 22) + "Options take `--name VALUE` or `--name=VALUE`, each once.\n");
  std::fputs(text.c_str(), stdout);
  return 0;
}

std::uint32_t parse_bits32(std::string_view text, std::string_view expected) {
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (const auto parsed = integer_in<std::uint32_t>(hex ? text.substr(2) : text, 0, UINT32_MAX, hex ? 16 : 10))
    return *parsed;
  refuse_value(expected, text);
}

double parse_decimal(std::string_view text, std::string_view expected, double least) {
  const std::string copy(text);
  char* end = nullptr;
  const double parsed = std::strtod(copy.c_str(), &end);
  if (copy.empty() || *end != '\0' || !std::isfinite(parsed) || parsed < least) refuse_value(expected, text);
  return parsed;
}

std::vector<std::string_view> split_list(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  while (true) {
    const std::size_t end = text.find(separator);
    items.push_back(text.substr(0, end));
    if (end == std::string_view::npos) return items;
    text.remove_prefix(end + 1);
  }
}

option output_option(output_style& style) {
  return {"--output", "STYLE", "text (default), md, latex, json", [&style](std::string_view name) {
            const auto named = output_style_from_name(name);
            if (!named) refuse_value("text, md, latex or json", name);
            style = *named;
          }};
}

namespace {

// --round's text in --help, from core/names.hpp's one table of spellings: each mode with every other name it
// accepts, the modes wrapped into lines of at most 76 characters.
const std::string& rounding_help() {
  static const std::string text = [] {
    std::string out, line;
    for (const setting_spelling<rounding_mode>& spelling : rounding_spellings) {
      std::string others;
      for (std::size_t i = 1; i < spelling.names.size(); ++i)
        if (!spelling.names[i].empty()) others += (others.empty() ? "" : ", ") + std::string(spelling.names[i]);
      std::string note = spelling.value == default_setting(rounding_mode{}) ? "default" : "";
      if (!others.empty()) note += (note.empty() ? "also " : "; also ") + others;
      std::string entry = std::string(spelling.names[0]) + (note.empty() ? "" : " (" + note + ")");
      if (spelling.value != rounding_spellings.back().value) entry += ",";
      if (!line.empty() && line.size() + 1 + entry.size() > 76) out += line + "\n", line.clear();
      line += (line.empty() ? "" : " ") + entry;
    }
    return out + line;
  }();
  return text;
}

constexpr std::string_view environment_option_name(std::uint8_t option) {
  switch (option) {
    case option_round: return "--round";
    case option_random_bits: return "--random-bits";
    case option_tininess: return "--tininess";
    case option_ftz: return "--ftz";
    case option_daz: return "--daz";
    default: return "--nan";
  }
}

}  // namespace

std::vector<option> environment_option_table(environment_options& options, bool testfloat_spellings) {
  environment& env = options.env;
  std::uint8_t& given = options.given;
  std::vector<option> table{
      {"--round", "MODE", rounding_help(),
       [&](std::string_view name) {
         const auto mode = rounding_mode_from_name(name);
         if (!mode) fail("unknown rounding mode " + quoted_input(name) + "; expected one of " + rounding_names_hint());
         env.rounding = *mode;
         given |= option_round;
       }},
      {"--random-bits", "N",
       "the 32 random bits stochastic rounding compares against (decimal or 0x);\n"
       "required with --round stochastic, refused without it",
       [&](std::string_view bits) {
         env.random_bits = parse_bits32(bits, "an integer from 0 to 2^32 - 1, decimal or 0x hex (e.g. 0x80000000)");
         given |= option_random_bits;
       }},
      {"--tininess", "before|after",
       "when an underflow is detected (default after, as on x86);\nalso after_rounding, before_rounding",
       [&](std::string_view name) {
         const auto tiny = setting_from_name(tininess_spellings, name);
         if (!tiny) refuse_value(setting_names_hint(tininess_spellings), name);
         env.tiny = *tiny;
         given |= option_tininess;
       }},
      {"--ftz", "", "flush tiny results to zero", [&](std::string_view) { env.flush_to_zero = true; given |= option_ftz; }},
      {"--daz", "", "read subnormal operands as zero",
       [&](std::string_view) { env.denormals_are_zero = true; given |= option_daz; }},
      {"--nan", "ieee|canonical",
       "NaN results: first NaN operand quieted (x86, default) or CUDA's canonical NaN\n(also: ieee_propagate, cuda)",
       [&](std::string_view name) {
         const auto nans = setting_from_name(nan_policy_spellings, name);
         if (!nans) refuse_value(setting_names_hint(nan_policy_spellings), name);
         env.nans = *nans;
         given |= option_nan;
       }},
  };
  if (testfloat_spellings) {
    table.push_back({"-rnear_even -rnear_maxMag -rminMag -rmin -rmax -rodd", "", "TestFloat's rounding spellings",
                     [&](std::string_view spelling) {
                       env.rounding = *rounding_mode_from_name(spelling.substr(2));
                       given |= option_round;
                     },
                     "--round"});
    table.push_back({"-tininessbefore -tininessafter", "", "TestFloat's tininess spellings",
                     [&](std::string_view spelling) {
                       env.tiny = spelling == "-tininessbefore" ? tininess::before_rounding : tininess::after_rounding;
                       given |= option_tininess;
                     },
                     "--tininess"});
  }
  return table;
}

void check_environment_options(const environment_options& options, std::uint8_t effective, std::string_view context,
                               std::string_view why) {
  for (std::uint8_t option = 1; option < every_environment_option; option <<= 1)
    if ((options.given & option) && !(effective & option))
      fail(std::string(context) + ": " + std::string(environment_option_name(option)) + " cannot change the result: " +
           std::string(why) + "; drop it");
  const bool stochastic = options.env.rounding == rounding_mode::stochastic;
  if (stochastic && !(options.given & option_random_bits))
    fail(std::string(context) + ": --round stochastic needs --random-bits N (e.g. --random-bits 0x80000000)");
  if (!stochastic && (options.given & option_random_bits))
    fail(std::string(context) + ": --random-bits is read only by --round stochastic; drop it or add that mode");
}

}  // namespace bitexact::cli
