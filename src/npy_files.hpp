// The .npy files the commands read (bitexact attention, bitexact matmul).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <bitexact/testing/npy.hpp>

#include "cli.hpp"

namespace bitexact::cli {

// A file name in a message, with control characters escaped so that the message stays one line.
std::string printable(std::string_view text);
// [2, 3]
std::string shape_text(const std::vector<std::size_t>& shape);
// The file, or exit 2 with one line; a float64 file is told to round to rounded_to first.
npy::array read_npy(const std::string& path, std::string_view rounded_to = "bf16");

}  // namespace bitexact::cli
