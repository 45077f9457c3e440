// Reading options, and the environment options shared by `trace` and `eval`.
#include <algorithm>
#include <charconv>
#include <string>

#include <bitexact/trace/parse.hpp>

#include "cli.hpp"

namespace bitexact::cli {

void argument_reader::once(std::string_view key) {
  if (std::find(given_.begin(), given_.end(), key) != given_.end())
    fail(std::string(command_) + ": " + std::string(key) + " is given twice; give each option once");
  given_.push_back(key);
}

bool argument_reader::take_value(std::string_view name, std::string_view& value, std::string_view key) {
  const std::string_view arg = current();
  if (arg == name) {
    if (index_ + 1 >= args_.size()) fail(std::string(command_) + ": " + std::string(name) + " needs a value");
    once(key.empty() ? name : key);
    value = args_[++index_];
    return true;
  }
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
    once(key.empty() ? name : key);
    value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

bool argument_reader::take_flag(std::string_view name, std::string_view key) {
  const std::string_view arg = current();
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=')
    fail(std::string(command_) + ": " + std::string(name) + " takes no value; write it alone");
  if (arg != name) return false;
  once(key.empty() ? name : key);
  return true;
}

void argument_reader::unknown_option() const {
  fail(std::string(command_) + ": unknown option " + quoted_input(current()) + "; see bitexact " +
       std::string(command_.substr(0, command_.find(' '))) + " --help");
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
    fail("--random-bits " + quoted_input(text) + " is not an integer in [0, 2^32); e.g. --random-bits 0x80000000");
  return static_cast<std::uint32_t>(parsed);
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

bool take_environment_option(argument_reader& reader, environment_options& options, bool testfloat_spellings) {
  environment& env = options.env;
  const std::string_view arg = reader.current();
  std::string_view value;
  if (reader.take_value("--round", value)) {
    const auto mode = rounding_mode_from_name(value);
    if (!mode)
      fail("unknown rounding mode " + quoted_input(value) + "; expected one of " + rounding_names_hint());
    env.rounding = *mode;
    options.given |= option_round;
  } else if (reader.take_value("--tininess", value)) {
    if (value == "before") env.tiny = tininess::before_rounding;
    else if (value == "after") env.tiny = tininess::after_rounding;
    else fail("--tininess expects before or after, not " + quoted_input(value));
    options.given |= option_tininess;
  } else if (reader.take_value("--nan", value)) {
    if (value == "ieee") env.nans = nan_policy::ieee_propagate;
    else if (value == "canonical") env.nans = nan_policy::canonical;
    else fail("--nan expects ieee or canonical, not " + quoted_input(value));
    options.given |= option_nan;
  } else if (reader.take_value("--random-bits", value)) {
    env.random_bits = parse_random_bits(value);
    options.given |= option_random_bits;
  } else if (reader.take_flag("--ftz")) {
    env.flush_to_zero = true;
    options.given |= option_ftz;
  } else if (reader.take_flag("--daz")) {
    env.denormals_are_zero = true;
    options.given |= option_daz;
  } else if (testfloat_spellings && arg.size() > 2 && arg.substr(0, 2) == "-r" &&
             rounding_mode_from_name(arg.substr(2)) && reader.take_flag(arg, "--round")) {
    env.rounding = *rounding_mode_from_name(arg.substr(2));
    options.given |= option_round;
  } else if (testfloat_spellings && (arg == "-tininessbefore" || arg == "-tininessafter") &&
             reader.take_flag(arg, "--tininess")) {
    env.tiny = arg == "-tininessbefore" ? tininess::before_rounding : tininess::after_rounding;
    options.given |= option_tininess;
  } else {
    return false;
  }
  return true;
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
