// A capture folder's MANIFEST lines "file FNV1A64 SHA256 PATH" checked
// against the files, byte for byte (tests/data/matmul, matmul_triton).
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <bitexact/core/checksum.hpp>

// The number of files checked; a mismatch fails the test, naming the file.
inline int check_manifest_files(const std::string& folder) {
  std::ifstream listing(folder + "MANIFEST");
  REQUIRE_MESSAGE(listing, "cannot open " << folder << "MANIFEST");
  std::string line;
  int files = 0;
  while (std::getline(listing, line)) {
    if (line.rfind("file ", 0) != 0) continue;
    std::istringstream fields(line.substr(5));
    std::string fnv, sha, path;
    fields >> fnv >> sha >> path;
    std::ifstream file(folder + path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    CHECK_MESSAGE(std::stoull(fnv, nullptr, 16) ==
                      bitexact::fnv1a64(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()),
                  path);
    ++files;
  }
  return files;
}
