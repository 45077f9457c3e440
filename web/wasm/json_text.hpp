// What the page's C++ entry points hand to JavaScript: JSON text (the records
// are small and flat; strings quoted by trace/render.hpp's json_quoted), and a
// trace as both the text the command prints and the same text cut into pieces
// that carry their bits' roles, so that the page can colour guard, round and
// sticky without parsing the text.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

#include <bitexact/trace/render.hpp>

namespace bitexact::web {

inline std::string error_json(std::string_view message) { return "{\"error\": " + json_quoted(message) + "}"; }

// {"text": render(t), "sections": render_document_json(layout_of(t))}: the
// sections are the document render() writes as text, so that the page,
// joining them as the text style does, shows the command's text exactly.
inline std::string trace_json(const trace& t) {
  return fmt::format("{{\"text\": {}, \"sections\": {}}}", json_quoted(render(t)), render_document_json(layout_of(t)));
}

// Entry points return a pointer to this, valid until the next call (the page
// copies it into a JavaScript string at once).
inline const char* handed_to_javascript(std::string text) {
  static std::string held;
  held = std::move(text);
  return held.c_str();
}

}  // namespace bitexact::web
