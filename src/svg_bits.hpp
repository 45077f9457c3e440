// One addition's trace drawn as a bit diagram (`bitexact trace add ... --svg`):
// the operands' significands and the exact sum as rows of bit cells, each
// cell in the column of its place value, the binary point between places 0
// and -1; the sum's bits coloured by what rounding did with them (kept,
// guard, round, sticky), the smaller operand's bits past the larger one's
// last place marked; then the rounded result, the normalisation, the
// decision and the exact error, all read from the trace record.
#pragma once

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bitexact/trace/render.hpp>

#include "svg_plot.hpp"

namespace bitexact::cli::svg {

namespace bits_detail {

enum class cell_role { plain, kept, guard, round, sticky, past_last_place };

struct role_style {
  cell_role role;
  const char* fill;
  const char* legend;
};

inline constexpr role_style role_styles[] = {
    {cell_role::kept, "#dcdcdc", "kept: the result's significand bits"},
    {cell_role::guard, "#f28b82", "guard: the first bit below the last kept place"},
    {cell_role::round, "#fbc16a", "round: the second"},
    {cell_role::sticky, "#9cc3f5", "sticky bits: ORed into one sticky bit"},
    {cell_role::past_last_place, "#8fd6c8", "bits past the larger operand's last place"},
};

inline const char* fill_of(cell_role role) {
  for (const role_style& s : role_styles)
    if (s.role == role) return s.fill;
  return "white";
}

// One row of the diagram: its bits by place, a label and a note.
struct bit_row {
  std::string label, note;
  bool negative = false;
  std::vector<std::pair<int, char>> bits;  // (place, '0' or '1')
  std::vector<cell_role> roles;            // one per bit
};

// A finite nonzero operand's significand, bit i at place exponent + i.
inline bit_row operand_row(const operand_record& operand, int past_below) {
  bit_row row{std::string(1, static_cast<char>('a' + operand.index)), describe_value(operand.fmt, operand.bits),
              operand.decoded.sign, {}, {}};
  const uint128 significand = operand.decoded.significand;
  for (int i = msb_index(significand); i >= 0; --i) {
    const int place = operand.decoded.exponent + i;
    row.bits.push_back({place, ((significand >> i) & 1) ? '1' : '0'});
    row.roles.push_back(place < past_below ? cell_role::past_last_place : cell_role::plain);
  }
  return row;
}

// Text cut into lines of at most `width` characters at spaces.
inline std::vector<std::string> wrapped(std::string_view text, std::size_t width) {
  std::vector<std::string> lines{""};
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (!lines.back().empty() && lines.back().size() + 1 + word.size() > width) lines.emplace_back();
    if (!lines.back().empty()) lines.back() += ' ';
    lines.back() += word;
    start = end + 1;
  }
  return lines;
}

}  // namespace bits_detail

// The diagram of an addition or subtraction of two finite nonzero operands
// whose exact sum is nonzero and was rounded; std::invalid_argument for any
// other trace (nothing was aligned, added and rounded to draw).
inline std::string addition_bits(const trace& t) {
  using namespace bits_detail;
  const bool is_sum = (t.op == operation::add || t.op == operation::sub) && t.operands.size() == 2 &&
                      is_finite_nonzero(t.operands[0].decoded.kind) && is_finite_nonzero(t.operands[1].decoded.kind);
  if (!is_sum || !t.alignment || !t.exact || t.exact->significand == 0 || !t.rounding)
    throw std::invalid_argument(
        "a bit diagram needs two finite nonzero operands and a nonzero sum (a special, a zero operand or an exact "
        "zero has no bits to align and round)");
  const rounding_event& r = *t.rounding;
  const alignment_event& alignment = *t.alignment;
  const operand_record& larger = t.operands[alignment.smaller_is_first ? 1 : 0];
  const char larger_name = static_cast<char>('a' + larger.index);
  const int larger_last_place = larger.decoded.exponent;

  std::vector<bit_row> rows;
  for (const operand_record& operand : t.operands)
    rows.push_back(operand_row(operand, &operand == &larger ? std::numeric_limits<int>::min() : larger_last_place));
  if (t.op == operation::sub) rows[1].label = "b (subtracted)";
  {
    bit_row sum{"exact sum", "= " + to_decimal(*t.exact_value, 40), t.exact->sign, {}, {}};
    // The exact register's trailing zeros below every operand's last place and the round bit say nothing.
    const uint128 significand = t.exact->significand;
    const int lowest_set = static_cast<std::uint64_t>(significand) != 0
                               ? std::countr_zero(static_cast<std::uint64_t>(significand))
                               : 64 + std::countr_zero(static_cast<std::uint64_t>(significand >> 64));
    int last_place = std::min(t.exact->exponent + lowest_set, r.lsb_exponent - 2);
    for (const operand_record& operand : t.operands) last_place = std::min(last_place, operand.decoded.exponent);
    for (int i = msb_index(significand); i >= std::max(0, last_place - t.exact->exponent); --i) {
      const int place = t.exact->exponent + i;
      sum.bits.push_back({place, ((t.exact->significand >> i) & 1) ? '1' : '0'});
      sum.roles.push_back(place >= r.lsb_exponent       ? cell_role::kept
                          : place == r.lsb_exponent - 1 ? cell_role::guard
                          : place == r.lsb_exponent - 2 ? cell_role::round
                                                        : cell_role::sticky);
    }
    // Guard and round are drawn even where the exact sum ends above them (they are 0).
    for (int place = std::min(sum.bits.back().first, r.lsb_exponent) - 1; place >= r.lsb_exponent - 2; --place) {
      sum.bits.push_back({place, '0'});
      sum.roles.push_back(place == r.lsb_exponent - 1 ? cell_role::guard : cell_role::round);
    }
    rows.push_back(std::move(sum));
  }
  {
    const int result_exponent = r.lsb_exponent + r.target.fraction_bits + (r.carry_out && !r.subnormal ? 1 : 0);
    bit_row rounded{fmt::format("rounded to {}", name_of(r.target)), describe_value(t.result_format, t.result_bits),
                    r.sign, {}, {}};
    int place = result_exponent;
    for (const char digit : t.rounded_binary) {
      if (digit == '.') continue;
      rounded.bits.push_back({place--, digit});
      rounded.roles.push_back(cell_role::kept);
    }
    rows.push_back(std::move(rounded));
  }

  int top = rows[0].bits.front().first, bottom = top;
  std::vector<cell_role> used;
  for (const bit_row& row : rows) {
    for (const auto& [place, digit] : row.bits) top = std::max(top, place), bottom = std::min(bottom, place);
    for (const cell_role role : row.roles)
      if (role != cell_role::plain && std::find(used.begin(), used.end(), role) == used.end()) used.push_back(role);
  }

  constexpr int cell = 18, label_width = 128, sign_width = 16, margin = 16, line_height = 18;
  constexpr double char_width = 7.0;  // 12 px DejaVu Sans, an average letter
  const int grid_left = margin + label_width + sign_width;
  const int grid_width = (top - bottom + 1) * cell;
  std::size_t note_chars = 0;
  for (const bit_row& row : rows) note_chars = std::max(note_chars, row.note.size());
  constexpr int least_width = 760;  // room for the lines of words under a narrow grid
  const int width = std::max(least_width, grid_left + grid_width + 12 +
                                              static_cast<int>(char_width * static_cast<double>(note_chars)) + margin);
  const std::size_t text_chars = static_cast<std::size_t>((width - 2 * margin) / char_width);
  const auto column_x = [&](int place) { return grid_left + (top - place) * cell; };

  // The lines under the grid, from the record's words.
  std::vector<std::string> notes;
  const auto add_note = [&](const std::string& text) {
    for (std::string& line : wrapped(text, text_chars)) notes.push_back(std::move(line));
  };
  if (alignment.exponent_difference == 0) {
    add_note("alignment: the exponents are equal, nothing moves");
  } else {
    add_note(fmt::format("alignment: exponent difference {}: the smaller operand moves {} place{} right; its bits "
                         "past {}'s last place stay in the exact sum",
                         alignment.exponent_difference, alignment.exponent_difference,
                         alignment.exponent_difference == 1 ? "" : "s", larger_name));
  }
  add_note("normalisation: " +
           (t.normalization_shift > 0
                ? fmt::format("carry-out: the sum's leading bit is {} place{} above the operands', so the last kept "
                              "place moves up too and one more bit falls below it",
                              t.normalization_shift, t.normalization_shift == 1 ? "" : "s")
            : t.normalization_shift < 0
                ? fmt::format("cancellation: the sum's leading bit is {} places below the operands'",
                              -t.normalization_shift)
                : std::string("the leading bit is already in place")));
  add_note(fmt::format("rounding to {} ({} significand bits, {}): guard {}, round {}, sticky bits {} -> sticky {}",
                       name_of(r.target), r.target.precision(), describe(t.env.rounding), r.guard ? 1 : 0,
                       r.round ? 1 : 0, t.sticky_bits.empty() ? "none" : t.sticky_bits, r.sticky ? 1 : 0));
  add_note("decision: " + t.decision + ": " + t.decision_reason);
  if (t.error)
    add_note("error (result - exact): " + to_decimal(*t.error) +
             (*t.error == 0 ? std::string(" (exact)") : " = " + to_fraction(*t.error)));

  const int title_y = margin + 14;
  const int axis_label_y = title_y + 26, axis_y = axis_label_y + 18;
  const int grid_top = axis_y + 8;
  const int row_gap = 8;
  const int grid_bottom = grid_top + static_cast<int>(rows.size()) * (cell + row_gap);
  const int notes_top = grid_bottom + 10;
  const int legend_top = notes_top + static_cast<int>(notes.size()) * line_height + 10;
  std::vector<role_style> legend;
  for (const role_style& s : role_styles)
    if (std::find(used.begin(), used.end(), s.role) != used.end()) legend.push_back(s);
  const int legend_rows = static_cast<int>(legend.size());
  const int height = legend_top + legend_rows * line_height + margin;

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      width, height);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"15\" font-weight=\"bold\">{} {} {} &#8594; {}</text>\n", margin,
                     title_y, plot_detail::escaped(describe_value(t.operands[0].fmt, t.operands[0].bits)),
                     t.op == operation::sub ? "-" : "+",
                     plot_detail::escaped(describe_value(t.operands[1].fmt, t.operands[1].bits)), name_of(t.result_format));
  // The place axis: every column's power of two.
  svg += fmt::format("<text x=\"{}\" y=\"{}\">bit place p (a 1 in column p is worth 2^p{})</text>\n",
                     grid_left, axis_label_y, top >= 0 && bottom < 0 ? "; dashed: the binary point" : "");
  for (int place = top; place >= bottom; --place)
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
                       column_x(place) + cell / 2, axis_y, place <= -10 ? 8 : 10, place);
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const bit_row& row = rows[n];
    const int y = grid_top + static_cast<int>(n) * (cell + row_gap);
    if (n == 2)  // the sum's rule, as on paper
      svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"black\"/>\n", grid_left - sign_width,
                         grid_left + grid_width, y - row_gap / 2);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", margin, y + 13, plot_detail::escaped(row.label));
    if (row.negative)
      svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" text-anchor=\"middle\">&#8722;</text>\n",
                         column_x(row.bits.front().first) - sign_width / 2, y + 14);
    for (std::size_t k = 0; k < row.bits.size(); ++k) {
      const int x = column_x(row.bits[k].first);
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#999\"/>\n"
                         "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-family=\"DejaVu Sans Mono, monospace\" "
                         "font-size=\"13\">{}</text>\n",
                         x, y, cell, cell, fill_of(row.roles[k]), x + cell / 2, y + 14, row.bits[k].second);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", grid_left + grid_width + 12, y + 13,
                       plot_detail::escaped(row.note));
  }
  const int point_x = column_x(0) + cell;
  if (top >= 0 && bottom < 0)
    svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"black\" stroke-width=\"2\" "
                     "stroke-dasharray=\"3,2\"/>\n",
                     point_x, grid_top - 4, grid_bottom - row_gap + 4);
  for (std::size_t n = 0; n < notes.size(); ++n)
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", margin, notes_top + 13 + static_cast<int>(n) * line_height,
                       plot_detail::escaped(notes[n]));
  for (int n = 0; n < legend_rows; ++n) {
    const role_style& s = legend[static_cast<std::size_t>(n)];
    const int y = legend_top + n * line_height;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#999\"/>\n"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       margin, y, s.fill, margin + 22, y + 12, s.legend);
  }
  return svg + "</svg>\n";
}

}  // namespace bitexact::cli::svg
