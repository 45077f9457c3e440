// NumPy .npy files (format versions 1 to 3), the format every PyTorch user can
// write in one line (numpy.save), and in which a kernel author's test, the
// `bitexact attention` command and the captures of tests/data hold heads and
// outputs. Only what attention inputs and outputs need:
// little-endian 2- and 4-byte elements in C order. Every error names the file
// and what was expected.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace bitexact::npy {

struct npy_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One array: its element type as NumPy spells it ("<u2", "<f4", ...), its
// shape, and its elements as raw little-endian bytes.
struct array {
  std::string descr;
  std::vector<std::size_t> shape;
  std::vector<unsigned char> bytes;

  std::size_t element_count() const {
    std::size_t n = 1;
    for (std::size_t extent : shape) n *= extent;
    return n;
  }
  std::size_t element_size() const { return descr.size() == 3 ? static_cast<std::size_t>(descr[2] - '0') : 0; }
  // The elements as unsigned integers of their own width (bit patterns).
  std::uint32_t word(std::size_t i) const {
    std::uint32_t w = 0;
    std::memcpy(&w, bytes.data() + i * element_size(), element_size());
    return w;
  }
};

namespace detail {

inline std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The value that follows 'key': in the header's Python dict literal.
inline std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw npy_error(path + ": not a .npy file: its header has no '" + key + "'");
  std::size_t start = header.find(':', at);
  if (start == std::string::npos) throw npy_error(path + ": not a .npy file: malformed header");
  ++start;
  while (start < header.size() && header[start] == ' ') ++start;
  const char open = header[start];
  const char close = open == '(' ? ')' : open == '\'' ? '\'' : ',';
  const std::size_t end = header.find(close, start + 1);
  if (end == std::string::npos) throw npy_error(path + ": not a .npy file: malformed header");
  return header.substr(start, end - start + (close == ',' ? 0 : 1));
}

// The data bytes of a shape's elements, or nullopt when that is 2^64 or more
// (the product would wrap).
inline std::optional<std::size_t> data_bytes(const std::vector<std::size_t>& shape, std::size_t element_size) {
  for (const std::size_t extent : shape)
    if (extent == 0) return 0;
  std::size_t bytes = element_size;
  for (const std::size_t extent : shape) {
    if (bytes > std::numeric_limits<std::size_t>::max() / extent) return std::nullopt;
    bytes *= extent;
  }
  return bytes;
}

}  // namespace detail

inline array read(const std::string& path) {
  // A folder opens as a stream on Linux and fails only when read (std::ios_failure): say what it is first.
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw npy_error(path + ": is a folder, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw npy_error(path + ": cannot open");
  std::vector<unsigned char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (file.size() < 10 || std::memcmp(file.data(), magic, 6) != 0)
    throw npy_error(path + ": not a .npy file (no \\x93NUMPY magic); save it with numpy.save");
  const int major = file[6];
  std::size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length = file[8] | std::size_t{file[9]} << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) throw npy_error(path + ": truncated .npy header");
    header_length = file[8] | std::size_t{file[9]} << 8 | std::size_t{file[10]} << 16 | std::size_t{file[11]} << 24;
    header_start = 12;
  } else {
    throw npy_error(path + ": .npy format version " + std::to_string(major) + " is not supported (1 to 3 are)");
  }
  if (file.size() < header_start + header_length) throw npy_error(path + ": truncated .npy header");
  const std::string header(file.begin() + static_cast<std::ptrdiff_t>(header_start),
                           file.begin() + static_cast<std::ptrdiff_t>(header_start + header_length));
  array a;
  std::string descr = detail::dict_value(header, "descr", path);
  if (descr.size() < 2 || descr.front() != '\'') throw npy_error(path + ": malformed descr in the .npy header");
  a.descr = descr.substr(1, descr.size() - 2);
  if (a.descr.size() == 3 && a.descr[0] == '|' && a.descr[2] == '1') a.descr[0] = '<';  // one byte has no order
  const bool known = a.descr == "<u1" || a.descr == "<i1" || a.descr == "<u2" || a.descr == "<i2" ||
                     a.descr == "<f2" || a.descr == "<u4" || a.descr == "<i4" || a.descr == "<f4";
  if (!known)
    throw npy_error(path + ": element type '" + a.descr +
                    "' is not supported; expected little-endian uint8/int8 (fp8 bit patterns), uint16/int16 (bf16 "
                    "bit patterns) or float32");
  if (detail::dict_value(header, "fortran_order", path).rfind("False", 0) != 0)
    throw npy_error(path + ": Fortran-ordered arrays are not supported; save a C-contiguous array");
  const std::string shape = detail::dict_value(header, "shape", path);
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  for (std::string item; std::getline(dims, item, ',');) {
    const std::size_t first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    if (first == std::string::npos) continue;
    const std::string extent = item.substr(first, last - first + 1);
    // Digits only, at most 19 of them: no sign, and an extent that std::size_t holds (10^19 < 2^64).
    if (extent.size() > 19 || extent.find_first_not_of("0123456789") != std::string::npos)
      throw npy_error(path + ": not a .npy file: its header's shape " + shape +
                      " has an extent that is not an integer from 0 to 10^19 - 1");
    a.shape.push_back(static_cast<std::size_t>(std::stoull(extent)));
  }
  const std::size_t data_start = header_start + header_length, held = file.size() - data_start;
  const std::optional<std::size_t> expected = detail::data_bytes(a.shape, a.element_size());
  if (expected != held)
    throw npy_error(path + ": holds " + std::to_string(held) + " data bytes, but its header " +
                    detail::shape_text(a.shape) + " of '" + a.descr + "' needs " +
                    (expected ? std::to_string(*expected) : "more than 2^64") +
                    (expected && held < *expected ? " (truncated?)" : ""));
  a.bytes.assign(file.begin() + static_cast<std::ptrdiff_t>(data_start), file.end());
  return a;
}

// Writes a C-ordered little-endian array in format version 1.0.
inline void write(const std::string& path, const std::string& descr, const std::vector<std::size_t>& shape,
                  const void* data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + detail::shape_text(shape) + ", }";
  // The data starts at a multiple of 64 bytes; the header ends in a newline.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw npy_error(path + ": cannot create");
  const unsigned char preamble[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xFF),
                                    static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(preamble), sizeof preamble);
  out << header;
  std::size_t n = 1;
  for (std::size_t extent : shape) n *= extent;
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n * static_cast<std::size_t>(descr[2] - '0')));
  if (!out) throw npy_error(path + ": write failed");
}

}  // namespace bitexact::npy
