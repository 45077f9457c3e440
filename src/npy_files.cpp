// The .npy files the commands read, with every message on one line naming the file.
#include <stdexcept>

#include <fmt/format.h>

#include "npy_files.hpp"

namespace bitexact::cli {

// A file name in a message, with control characters escaped so that the message stays one line.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) out += fmt::format("\\x{:02X}", byte);
    else out += c;
  }
  return out;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// A float64 file (paper_reference_fp64's --out-o, or numbers saved from NumPy) is refused with the way out:
// round it to the format the file holds (bf16 for attention's Q, K, V and O; float32 for L and delta).
npy::array read_npy(const std::string& path, std::string_view rounded_to) {
  try {
    return npy::read(path);
  } catch (const npy::npy_error& error) {
    const std::string_view message = error.what();
    // Named by what this file must hold, not by every type the reader knows.
    for (const std::string_view float64 : {"'<f8'", "'>f8'"})
      if (message.find(std::string("element type ") + std::string(float64)) != std::string_view::npos)
        fail(printable(path) + ": element type " + std::string(float64) + " (float64) is not " + std::string(rounded_to) +
             "; round it to " + std::string(rounded_to) + " first");
    fail(printable(message));
  } catch (const std::logic_error&) {  // std::stoull on a shape that is not a list of integers
    fail(printable(path) + ": not a .npy file: its header's shape is not a tuple of integers");
  }
}

}  // namespace bitexact::cli
