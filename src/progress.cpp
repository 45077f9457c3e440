// The progress line of a long computation (cli.hpp's progress_line).
#include <unistd.h>

#include <fmt/format.h>

#include "cli.hpp"

namespace bitexact::cli {

namespace {

// "3h 05m", "12m 40s", "9s".
std::string duration_text(double seconds) {
  const auto whole = static_cast<long long>(seconds + 0.5);
  if (whole >= 3600) return fmt::format("{}h {:02}m", whole / 3600, whole % 3600 / 60);
  if (whole >= 60) return fmt::format("{}m {:02}s", whole / 60, whole % 60);
  return fmt::format("{}s", whole);
}

}  // namespace

progress_line::progress_line(std::string name, std::string unit, std::uint64_t total)
    : name_(std::move(name)),
      unit_(std::move(unit)),
      total_(total),
      terminal_(isatty(fileno(stderr)) == 1),
      start_(std::chrono::steady_clock::now()),
      next_(start_ + std::chrono::seconds(1)) {}

progress_line::~progress_line() {
  if (shown_ > 0) std::fprintf(stderr, "\r%s\r", std::string(shown_, ' ').c_str());
}

void progress_line::add(std::uint64_t done) {
  if (!terminal_) return;
  const std::lock_guard<std::mutex> hold(lock_);
  done_ += done;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return;
  next_ = now + std::chrono::milliseconds(500);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = static_cast<double>(done_) / seconds;
  std::string line = fmt::format("bitexact: {}: {} of {} {} ({:.1f}%), {:.{}f} {}/s", name_, done_, total_, unit_,
                                 100.0 * static_cast<double>(done_) / static_cast<double>(total_), rate,
                                 rate >= 10 ? 0 : 2, unit_);
  if (done_ > 0) line += ", about " + duration_text(static_cast<double>(total_ - done_) / rate) + " left";
  // The new line pads over what is left of a longer one.
  if (line.size() < shown_) line.append(shown_ - line.size(), ' ');
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
  shown_ = line.size();
}

}  // namespace bitexact::cli
