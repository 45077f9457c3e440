// Reading a kernel description's JSON object (an attention kernel's, a GEMM's):
// fields taken one by one, each checked for its type and range, a name looked
// up in its table, and any field left over refused, always with one line
// that names the field. The tables of names are the descriptions' own
// (attention/kernel_json.hpp, matmul/description_json.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "../core/format.hpp"
#include "gpu.hpp"

namespace bitexact::description_json {

// A field's spellings and the values they stand for.
template <class E>
using table = std::initializer_list<std::pair<std::string_view, E>>;

template <class E>
std::string_view name_of(const table<E>& names, E value) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "?";
}

[[noreturn]] inline void description_error(const std::string& field, const std::string& what) {
  throw std::invalid_argument("kernel description: " + (field.empty() ? what : "field '" + field + "': " + what));
}

// The document of a description's text, or the refusal that says it is not JSON.
inline nlohmann::json parse(std::string_view text) {
  if (text.starts_with("\x93NUMPY")) description_error("", "not JSON: a NumPy .npy file, not a description");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // The parser quotes what it last read: bytes that are not printable ASCII
    // written as \xNN, so that the message stays one line of text.
    std::string quoted;
    for (const char c : std::string_view(e.what())) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte >= 0x20 && byte < 0x7F) {
        quoted += c;
        continue;
      }
      constexpr char digits[] = "0123456789ABCDEF";
      quoted += std::string("\\x") + digits[byte >> 4] + digits[byte & 15];
    }
    description_error("", "not JSON (" + quoted + ")");
  }
}

class json_fields {
 public:
  json_fields(const nlohmann::json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) description_error(path_, "expected an object");
  }

  bool has(std::string_view key) const { return object_.contains(std::string(key)); }

  // A field that some descriptions read and others do not: `read` says
  // whether this one does, `because` ("block_order is first_to_last") which
  // field decides. Missing where read, or present where not, is refused naming
  // both; returns read.
  bool read_when(bool read, std::string_view key, const std::string& because) const {
    if (read && !has(key)) description_error(field(key), "missing (read when " + because + ")");
    if (!read && has(key)) description_error(field(key), "not read when " + because + ": leave it out");
    return read;
  }

  const nlohmann::json& take(std::string_view key) {
    const std::string k(key);
    if (!object_.contains(k)) description_error(field(k), "missing");
    taken_.insert(k);
    return object_.at(k);
  }

  std::string text(std::string_view key) {
    const nlohmann::json& value = take(key);
    if (!value.is_string()) description_error(field(key), "expected a string");
    return value.get<std::string>();
  }

  int integer(std::string_view key, int least, int most) {
    const nlohmann::json& value = take(key);
    if (!value.is_number_integer() || value.get<std::int64_t>() < least || value.get<std::int64_t>() > most)
      description_error(field(key), "expected an integer from " + std::to_string(least) + " to " + std::to_string(most));
    return value.get<int>();
  }

  bool boolean(std::string_view key) {
    const nlohmann::json& value = take(key);
    if (!value.is_boolean()) description_error(field(key), "expected true or false");
    return value.get<bool>();
  }

  // A finite number, rounded to float as a kernel's float argument is.
  float32 number(std::string_view key) {
    const nlohmann::json& value = take(key);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || !std::isfinite(static_cast<float>(value.get<double>())))
      description_error(field(key), "expected a finite number");
    return from_host(static_cast<float>(value.get<double>()));
  }

  template <class E>
  E named(std::string_view key, const table<E>& names) {
    const std::string value = text(key);
    std::string all;
    for (const auto& [name, v] : names) {
      if (name == value) return v;
      all += (all.empty() ? "" : ", ") + std::string(name);
    }
    description_error(field(key), "'" + value + "' is not one of: " + all);
  }

  // A unit of the GPU records (gpu.hpp) by its name.
  const tensor_core_instruction& tensor_core(std::string_view key) {
    const std::string value = text(key);
    try {
      return find_tensor_core_unit(value);
    } catch (const std::invalid_argument&) {
      description_error(field(key), "'" + value + "' is not one of: " + tensor_core_unit_names());
    }
  }

  void finish() const {
    for (const auto& [key, value] : object_.items())
      if (taken_.count(key) == 0) description_error(field(key), "unknown field");
  }

  std::string field(std::string_view key) const { return path_.empty() ? std::string(key) : path_ + "." + std::string(key); }

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::set<std::string> taken_;
};

}  // namespace bitexact::description_json
