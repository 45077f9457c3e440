// The environment options shared by `trace` and `eval`.
#include <charconv>
#include <string>

#include <bitexact/trace/parse.hpp>

#include "cli.hpp"

namespace bitexact::cli {

bool take_value(const arguments& args, std::size_t& i, std::string_view name, std::string_view& value) {
  const std::string_view arg = args[i];
  if (arg == name) {
    if (i + 1 >= args.size()) fail(std::string(name) + " needs a value");
    value = args[++i];
    return true;
  }
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
    value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

namespace {

std::uint32_t parse_random_bits(std::string_view text) {
  std::uint64_t parsed = 0;
  int base = 10;
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed, base);
  if (error != std::errc{} || end != digits.data() + digits.size() || parsed > 0xFFFFFFFFu)
    fail("--random-bits '" + std::string(text) + "' is not an integer in [0, 2^32); e.g. --random-bits 0x80000000");
  return static_cast<std::uint32_t>(parsed);
}

}  // namespace

bool take_environment_option(const arguments& args, std::size_t& i, environment_options& options,
                             bool testfloat_spellings) {
  environment& env = options.env;
  const std::string_view arg = args[i];
  std::string_view value;
  if (take_value(args, i, "--round", value)) {
    const auto mode = rounding_mode_from_name(value);
    if (!mode) fail("unknown rounding mode '" + std::string(value) + "'; expected one of " + std::string(rounding_names_hint));
    env.rounding = *mode;
  } else if (take_value(args, i, "--tininess", value)) {
    if (value == "before") env.tiny = tininess::before_rounding;
    else if (value == "after") env.tiny = tininess::after_rounding;
    else fail("--tininess expects before or after, not '" + std::string(value) + "'");
  } else if (take_value(args, i, "--nan", value)) {
    if (value == "ieee") env.nans = nan_policy::ieee_propagate;
    else if (value == "canonical") env.nans = nan_policy::canonical;
    else fail("--nan expects ieee or canonical, not '" + std::string(value) + "'");
  } else if (take_value(args, i, "--random-bits", value)) {
    env.random_bits = parse_random_bits(value);
    options.random_bits_given = true;
  } else if (arg == "--ftz") {
    env.flush_to_zero = true;
  } else if (arg == "--daz") {
    env.denormals_are_zero = true;
  } else if (testfloat_spellings && arg.size() > 2 && arg.substr(0, 2) == "-r" &&
             rounding_mode_from_name(arg.substr(2))) {
    env.rounding = *rounding_mode_from_name(arg.substr(2));
  } else if (testfloat_spellings && arg == "-tininessbefore") {
    env.tiny = tininess::before_rounding;
  } else if (testfloat_spellings && arg == "-tininessafter") {
    env.tiny = tininess::after_rounding;
  } else {
    return false;
  }
  return true;
}

}  // namespace bitexact::cli
