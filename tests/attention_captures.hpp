// The captured attention heads of tests/data (attention/, attention_kernel/,
// attention_backends/): their MANIFEST, one line a case and a checksum a file,
// and their bf16 arrays. Shared by the replay tests.
#pragma once

#include <doctest/doctest.h>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/shape.hpp>
#include <bitexact/core/checksum.hpp>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <bitexact/testing/npy.hpp>

namespace bitexact::test {

// case NAME BATCH HEADS QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL SCALE SPLITS HEAD
struct captured_case {
  std::string name;
  attention::attention_shape shape;  // the whole call's
  std::optional<double> scale;       // none: the default
  int splits = 0;                    // as the MANIFEST says (PyTorch's launch grid for attention/)
  int head = 0;                      // the head kept
};

struct captured_manifest {
  std::vector<captured_case> cases;
  int files = 0;  // file lines, each checksum checked
};

// Why a call is refused (resolve_call's one line), or "" when it resolves.
inline std::string refusal_of(const attention::attention_call& call) {
  try {
    attention::resolve_call(call);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

inline std::string hex(std::uint64_t x) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(x));
  return text;
}

inline std::uint64_t file_checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fnv1a64(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

// A folder's MANIFEST, after checking every file's checksum.
inline captured_manifest read_manifest(const std::string& dir) {
  std::ifstream in(dir + "/MANIFEST");
  REQUIRE_MESSAGE(in, "cannot open " << dir << "/MANIFEST");
  captured_manifest manifest;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "case") {
      captured_case c;
      std::string scale;
      int causal = 0;
      fields >> c.name >> c.shape.batch >> c.shape.heads >> c.shape.query_rows >> c.shape.key_rows >> c.shape.head_dim >>
          causal >> scale >> c.splits >> c.head;
      REQUIRE_MESSAGE(fields, "malformed MANIFEST line: " << line);
      c.shape.causal = causal != 0;
      if (scale != "default") c.scale = std::stod(scale);
      manifest.cases.push_back(c);
    } else if (kind == "file") {
      std::string checksum, path;
      fields >> checksum >> path;
      CHECK_MESSAGE(hex(file_checksum(dir + "/" + path)) == checksum, path << ": checksum differs from MANIFEST");
      ++manifest.files;
    }
  }
  return manifest;
}

// A .npy of bf16 patterns (uint16 or int16) holding exactly count elements.
inline std::vector<bfloat16> read_bf16(const std::string& path, std::size_t count) {
  const npy::array a = npy::read(path);
  REQUIRE(a.element_size() == 2);
  REQUIRE(a.element_count() == count);
  std::vector<bfloat16> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = bfloat16::from_bits(a.word(i));
  return values;
}

}  // namespace bitexact::test
