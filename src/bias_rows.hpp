// What the `bitexact bias` analyses share: the writing of their output
// files, and the constructed attention row of `bias mechanism`
// (attention/tie_row.hpp).
#pragma once

#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/tie_row.hpp>

#include "cli.hpp"

namespace bitexact::cli::bias {

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail("bias: cannot write " + quoted_input(path));
}

using attention::build_tie_row;
using attention::evenly_spaced;
using attention::row_operands;
using attention::tie_row;

}  // namespace bitexact::cli::bias
