// Minimal SVG plots for the command's figures: panels stacked one above the
// other, each with its axes, ticks at 1-2-5 steps (or x ticks given by the
// caller), axis labels and a legend above the plot area; line plots
// (polylines with optional whiskers, faint vertical marks such as the keys
// where P̄ = 1) and bar charts (groups of bars with whiskers). Written here
// rather than taken from a plotting library so that a figure is regenerated
// by the tool alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace bitexact::cli::svg {

struct series {
  std::string name, color;
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  std::vector<double> whiskers{};                 // empty, or per point the half height of a bar y -+ w
  std::string dash = "6,3";                       // the stroke-dasharray of a dashed line
};

// Vertical lines at the given x, across the plot area.
struct marks {
  std::string name, color;
  std::vector<double> x;
};

struct panel {
  std::string title, x_label, y_label;
  std::vector<series> lines;
  std::vector<marks> marked;
  std::vector<std::pair<double, std::string>> x_ticks{};  // (x, label); empty: 1-2-5 steps from 0
};

namespace plot_detail {

inline std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten giving about `wanted` ticks.
inline double tick_step(double range, int wanted) {
  if (!(range > 0)) return 1;
  const double raw = range / wanted, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

struct axis_range {
  double low = 0, high = 1, step = 1;
};

// The data's range with 0 included, widened to whole ticks.
inline axis_range range_of(double low, double high, int wanted) {
  low = std::min(low, 0.0), high = std::max(high, 0.0);
  if (high - low <= 0) high = low + 1;
  const double step = tick_step(high - low, wanted);
  return {std::floor(low / step) * step, std::ceil(high / step) * step, step};
}

inline std::string tick_label(double value, double step) {
  if (std::abs(value) < step * 1e-6) return "0";
  return fmt::format("{:g}", value);
}

// The opening of an SVG document of width by height pixels on white.
inline std::string document_start(int width, int height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      width, height);
}

// Horizontal grid lines with their tick labels at the left of the plot area.
template <class ToY>
void y_grid(std::string& svg, const axis_range& ys, ToY py, double plot_left, double plot_right) {
  for (double y = ys.low; y <= ys.high + ys.step * 1e-9; y += ys.step)
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.2f}\" y2=\"{2:.2f}\" stroke=\"#e4e4e4\"/>\n"
                       "<text x=\"{3}\" y=\"{4:.2f}\" text-anchor=\"end\">{5}</text>\n",
                       plot_left, plot_right, py(y), plot_left - 6, py(y) + 4, tick_label(y, ys.step));
}

inline double legend_width(const std::string& name) { return 30 + 7.0 * static_cast<double>(name.size()) + 18; }

// One legend entry (a short line and the name) at x, which moves past it.
inline void legend_entry(std::string& svg, double& x, double y, const std::string& name, const std::string& color,
                         const std::string& dash, double opacity, int stroke_width = 2) {
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"{9}\" "
                     "stroke-opacity=\"{4}\"{5}/>\n<text x=\"{6}\" y=\"{7}\">{8}</text>\n",
                     x, x + 24, y - 4, color, opacity, dash, x + 30, y, escaped(name), stroke_width);
  x += legend_width(name);
}

// A line plot's legend entries (name, color, stroke-dasharray attribute, opacity).
struct legend_item {
  std::string name, color, dash;
  double opacity = 1;
};

// How many rows the legend takes when entries wrap at `room` pixels.
inline int legend_rows(const std::vector<legend_item>& items, double room) {
  int rows = 1;
  double x = 0;
  for (const legend_item& item : items) {
    if (x > 0 && x + legend_width(item.name) > room) ++rows, x = 0;
    x += legend_width(item.name);
  }
  return rows;
}

}  // namespace plot_detail

// The figure as an SVG document, width by (panel_height x panels) pixels; a
// legend too long for one row wraps, and the plot area starts below it.
inline std::string line_plot(const std::vector<panel>& panels, int width = 900, int panel_height = 360) {
  constexpr int left = 96, right = 24, bottom = 54, legend_row_height = 16;
  std::string svg = plot_detail::document_start(width, panel_height * static_cast<int>(panels.size()));
  for (std::size_t n = 0; n < panels.size(); ++n) {
    const panel& p = panels[n];
    const double y0 = static_cast<double>(panel_height) * static_cast<double>(n);
    std::vector<plot_detail::legend_item> legend;
    for (const series& s : p.lines)
      legend.push_back({s.name, s.color, s.dashed ? " stroke-dasharray=\"" + s.dash + "\"" : "", 1});
    for (const marks& m : p.marked) legend.push_back({m.name, m.color, " stroke-dasharray=\"2,3\"", 0.6});
    const double plot_left = left, plot_right = width - right;
    const int legend_rows = plot_detail::legend_rows(legend, plot_right - plot_left);
    const double plot_top = y0 + 62 + legend_row_height * (legend_rows - 1), plot_bottom = y0 + panel_height - bottom;
    double x_high = 1, y_low = 0, y_high = 0;
    for (const series& s : p.lines)
      for (std::size_t i = 0; i < s.points.size(); ++i) {
        const auto [x, y] = s.points[i];
        const double w = i < s.whiskers.size() && std::isfinite(s.whiskers[i]) ? s.whiskers[i] : 0;
        x_high = std::max(x_high, x), y_low = std::min(y_low, y - w), y_high = std::max(y_high, y + w);
      }
    for (const auto& tick : p.x_ticks) x_high = std::max(x_high, tick.first);
    plot_detail::axis_range xs = plot_detail::range_of(0, x_high, 8);
    const plot_detail::axis_range ys = plot_detail::range_of(y_low, y_high, 6);
    if (!p.x_ticks.empty()) xs = {std::min(0.0, p.x_ticks.front().first) - 0.25, x_high + 0.25, 1};
    const auto px = [&](double x) { return plot_left + (x - xs.low) / (xs.high - xs.low) * (plot_right - plot_left); };
    const auto py = [&](double y) { return plot_bottom - (y - ys.low) / (ys.high - ys.low) * (plot_bottom - plot_top); };
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", plot_left, y0 + 20,
                       plot_detail::escaped(p.title));
    // Grid and ticks.
    plot_detail::y_grid(svg, ys, py, plot_left, plot_right);
    std::vector<std::pair<double, std::string>> x_ticks = p.x_ticks;
    if (x_ticks.empty())
      for (double x = xs.low; x <= xs.high + xs.step * 1e-9; x += xs.step) x_ticks.emplace_back(x, plot_detail::tick_label(x, xs.step));
    for (const auto& [x, label] : x_ticks)
      svg += fmt::format("<line x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e4e4e4\"/>\n"
                         "<text x=\"{0:.2f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                         px(x), plot_top, plot_bottom, plot_bottom + 16, plot_detail::escaped(label));
    for (const marks& m : p.marked)
      for (const double x : m.x)
        svg += fmt::format("<line x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"{3}\" stroke-opacity=\"0.45\" "
                           "stroke-dasharray=\"2,3\"/>\n",
                           px(x), plot_top, plot_bottom, m.color);
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.2f}\" y2=\"{2:.2f}\" stroke=\"#888\"/>\n", plot_left, plot_right, py(0));
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", plot_left,
                       plot_top, plot_right - plot_left, plot_bottom - plot_top);
    for (const series& s : p.lines) {
      std::string points;
      for (const auto& [x, y] : s.points) points += fmt::format("{:.2f},{:.2f} ", px(x), py(y));
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{} points=\"{}\"/>\n", s.color,
                         s.dashed ? " stroke-dasharray=\"" + s.dash + "\"" : "", points);
      for (std::size_t i = 0; i < s.whiskers.size() && i < s.points.size(); ++i) {
        const auto [x, y] = s.points[i];
        if (!std::isfinite(s.whiskers[i])) continue;
        svg += fmt::format("<path d=\"M{0:.2f},{1:.2f}V{2:.2f}M{3:.2f},{1:.2f}H{4:.2f}M{3:.2f},{2:.2f}H{4:.2f}\" stroke=\"{5}\" "
                           "stroke-width=\"1\" fill=\"none\"/>\n",
                           px(x), py(y - s.whiskers[i]), py(y + s.whiskers[i]), px(x) - 3, px(x) + 3, s.color);
      }
    }
    // Axis labels, and the legend in rows between the title and the plot.
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (plot_left + plot_right) / 2,
                       plot_bottom + 38, plot_detail::escaped(p.x_label));
    svg += fmt::format("<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n", 18,
                       (plot_top + plot_bottom) / 2, plot_detail::escaped(p.y_label));
    double legend_x = plot_left, legend_y = y0 + 42;
    for (const plot_detail::legend_item& item : legend) {
      if (legend_x > plot_left && legend_x + plot_detail::legend_width(item.name) > plot_right)
        legend_x = plot_left, legend_y += legend_row_height;
      plot_detail::legend_entry(svg, legend_x, legend_y, item.name, item.color, item.dash, item.opacity);
    }
  }
  return svg + "</svg>\n";
}

// Bars of one series, one per group: the value and its whisker (an interval, such as a confidence interval).
struct bar_series {
  std::string name, color;
  std::vector<double> value, low, high;
};

struct bar_panel {
  std::string title, y_label;
  std::vector<std::string> groups;  // labels under the groups; '_' breaks a label into lines
  std::vector<bar_series> bars;
};

// The bar chart as an SVG document: in each panel the series' bars side by
// side in every group, from 0 to the value, whiskers from low to high.
inline std::string bar_chart(const std::vector<bar_panel>& panels, int width = 900, int panel_height = 380) {
  constexpr int left = 96, right = 24, top = 62, bottom = 64;
  std::string svg = plot_detail::document_start(width, panel_height * static_cast<int>(panels.size()));
  for (std::size_t n = 0; n < panels.size(); ++n) {
    const bar_panel& p = panels[n];
    const double y0 = static_cast<double>(panel_height) * static_cast<double>(n);
    const double plot_left = left, plot_right = width - right, plot_top = y0 + top, plot_bottom = y0 + panel_height - bottom;
    double y_low = 0, y_high = 0;
    for (const bar_series& b : p.bars)
      for (std::size_t g = 0; g < b.value.size(); ++g)
        y_low = std::min({y_low, b.value[g], b.low[g]}), y_high = std::max({y_high, b.value[g], b.high[g]});
    const plot_detail::axis_range ys = plot_detail::range_of(y_low, y_high, 6);
    const auto py = [&](double y) { return plot_bottom - (y - ys.low) / (ys.high - ys.low) * (plot_bottom - plot_top); };
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", plot_left, y0 + 20,
                       plot_detail::escaped(p.title));
    plot_detail::y_grid(svg, ys, py, plot_left, plot_right);
    const double group_width = (plot_right - plot_left) / static_cast<double>(std::max<std::size_t>(p.groups.size(), 1));
    const double bar_width = group_width * 0.7 / static_cast<double>(std::max<std::size_t>(p.bars.size(), 1));
    for (std::size_t g = 0; g < p.groups.size(); ++g) {
      const double group_left = plot_left + group_width * static_cast<double>(g);
      for (std::size_t b = 0; b < p.bars.size(); ++b) {
        const bar_series& s = p.bars[b];
        const double x = group_left + group_width * 0.15 + bar_width * static_cast<double>(b);
        const double from = py(std::max(s.value[g], 0.0)), to = py(std::min(s.value[g], 0.0));
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" fill-opacity=\"0.8\"/>\n",
                           x, from, bar_width, to - from, s.color);
        const double middle = x + bar_width / 2;
        svg += fmt::format("<path d=\"M{0:.2f},{1:.2f}V{2:.2f}M{3:.2f},{1:.2f}H{4:.2f}M{3:.2f},{2:.2f}H{4:.2f}\" stroke=\"black\" "
                           "fill=\"none\"/>\n",
                           middle, py(s.low[g]), py(s.high[g]), middle - bar_width / 4, middle + bar_width / 4);
      }
      // The group's label under the plot, a line per '_'-separated word.
      std::string label = p.groups[g];
      double line_y = plot_bottom + 16;
      for (std::size_t start = 0; start <= label.size();) {
        const std::size_t end = std::min(label.find('_', start), label.size());
        svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}</text>\n", group_left + group_width / 2,
                           line_y, plot_detail::escaped(label.substr(start, end - start)));
        line_y += 14, start = end + 1;
      }
    }
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.2f}\" y2=\"{2:.2f}\" stroke=\"#888\"/>\n", plot_left, plot_right, py(0));
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", plot_left,
                       plot_top, plot_right - plot_left, plot_bottom - plot_top);
    svg += fmt::format("<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n", 18,
                       (plot_top + plot_bottom) / 2, plot_detail::escaped(p.y_label));
    double legend_x = plot_left;
    for (const bar_series& s : p.bars) plot_detail::legend_entry(svg, legend_x, y0 + 42, s.name, s.color, "", 0.8, 8);
  }
  return svg + "</svg>\n";
}

}  // namespace bitexact::cli::svg
