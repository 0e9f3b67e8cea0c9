// The planner's report (remat/planner.h): a table for the terminal and a
// standalone SVG, both pure functions of a PlanReport. The SVG is written
// by hand (no dependency): SVG 1.1, every text escaped, every coordinate
// finite whatever the report holds (no points, empty timelines, a zero
// peak, nothing feasible).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "remat/planner.h"

namespace dtr::remat {

std::string_view plan_outcome_name(PlanOutcome o) {
  switch (o) {
    case PlanOutcome::kFeasible:
      return "feasible";
    case PlanOutcome::kOutOfMemory:
      return "out_of_memory";
    case PlanOutcome::kThrash:
      return "thrash";
  }
  return "unknown";
}

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
double to_mib(int64_t bytes) { return double(bytes) / kMiB; }

// The heuristics of the report in the order they first appear (points,
// then bisection results).
std::vector<Heuristic> heuristics_of(const PlanReport& r) {
  std::vector<Heuristic> out;
  auto add = [&](Heuristic h) {
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  };
  for (const PlanPoint& p : r.points) add(p.heuristic);
  for (const PlanPoint& p : r.smallest_feasible) add(p.heuristic);
  return out;
}

const PlanPoint* smallest_feasible_of(const PlanReport& r, Heuristic h) {
  for (const PlanPoint& p : r.smallest_feasible) {
    if (p.heuristic == h) return &p;
  }
  return nullptr;
}

// The first line of `text`, at most `max_chars` characters.
std::string first_line(std::string_view text, size_t max_chars) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() <= max_chars) return std::string(line);
  return fmt::format("{}...", line.substr(0, max_chars - 3));
}

// A number for a table cell: "n/a" where it is not finite.
std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  return fmt::format("{:.{}f}", v, decimals);
}

// ---------------------------------------------------------------- table

void format_header(const PlanReport& r, std::string& out) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "dtr plan on {}: {} ops recorded ({} runtime events)\n", r.device.str(), r.ops,
                 r.events);
  fmt::format_to(o, "  recorded peak      {:>10.2f} MiB ({} bytes)\n", to_mib(r.peak_bytes),
                 r.peak_bytes);
  fmt::format_to(o, "  resident at start  {:>10.2f} MiB ({} bytes)\n",
                 to_mib(r.start_resident_bytes), r.start_resident_bytes);
  fmt::format_to(o, "  step {} s, kernels {} s; all simulations {} s\n", fixed(r.step_seconds, 4),
                 fixed(r.kernel_seconds, 4), fixed(r.simulate_seconds, 4));
}

void format_floor(const PlanReport& r, std::string& out) {
  auto o = std::back_inserter(out);
  fmt::format_to(o,
                 "\nfloor (never evictable): {:.2f} MiB ({} bytes) = constants {:.2f} MiB + "
                 "locked {:.2f} MiB",
                 to_mib(r.floor_bytes), r.floor_bytes, to_mib(r.floor_constant_bytes),
                 to_mib(r.floor_locked_bytes));
  if (!r.floor_op.empty()) fmt::format_to(o, " at '{}'", r.floor_op);
  if (r.peak_bytes > 0) {
    fmt::format_to(o, "; {:.3f} of the peak", double(r.floor_bytes) / double(r.peak_bytes));
  }
  out += '\n';
  for (const FloorMember& m : r.floor_members) {
    fmt::format_to(o, "  {:>10.2f} MiB  {:>12}  {}\n", to_mib(m.bytes), m.bytes, m.what);
  }
}

void format_points(const PlanReport& r, const std::vector<Heuristic>& heuristics,
                   std::string& out) {
  auto o = std::back_inserter(out);
  out += "\nbudgets (predicted):\n";
  if (r.points.empty()) {
    out += "  none simulated\n";
    return;
  }
  // The host tier's columns only where some point swapped (Note [host tier]).
  const bool swaps = std::any_of(r.points.begin(), r.points.end(), [](const PlanPoint& p) { return p.swap_outs > 0; });
  fmt::format_to(o, "  {:<10} {:>8} {:>11} {:<14} {:>11} {:>10} {:>9} {:>9} {:>12} {:>10} {:>9}{}\n",
                 "heuristic", "fraction", "budget MiB", "outcome", "peak MiB", "evictions",
                 "replays", "remats", "recomp GFLOP", "recomp s", "slowdown",
                 swaps ? fmt::format(" {:>9} {:>9} {:>10} {:>8}", "swap outs", "swap ins", "copied MiB", "copy s")
                       : std::string());
  for (size_t g = 0; g < heuristics.size(); ++g) {
    bool any = false;
    for (const PlanPoint& p : r.points) {
      if (p.heuristic != heuristics[g]) continue;
      if (!any && g > 0) out += '\n';
      any = true;
      fmt::format_to(o, "  {:<10} {:>8} {:>11.2f} {:<14}", heuristic_name(p.heuristic),
                     fixed(p.fraction, 3), to_mib(p.budget_bytes), plan_outcome_name(p.outcome));
      if (!p.feasible()) {
        fmt::format_to(o, " {}\n", first_line(p.error, 72));
        continue;
      }
      fmt::format_to(o, " {:>11.2f} {:>10} {:>9} {:>9} {:>12} {:>10} {:>8}x",
                     to_mib(p.peak_bytes), p.evictions, p.recomputed_ops, p.rematerializations,
                     fixed(p.recomputed_flops / 1e9, 3), fixed(p.recompute_seconds, 4),
                     fixed(p.predicted_slowdown, 3));
      if (swaps) {
        fmt::format_to(o, " {:>9} {:>9} {:>10.2f} {:>8}", p.swap_outs, p.swap_ins, to_mib(p.swap_bytes),
                       fixed(p.swap_seconds_estimated, 4));
      }
      out += '\n';
    }
  }
}

void format_smallest(const PlanReport& r, const std::vector<Heuristic>& heuristics,
                     std::string& out) {
  if (r.smallest_feasible.empty()) return;
  auto o = std::back_inserter(out);
  out += "\nsmallest feasible budget (bisection):\n";
  for (Heuristic h : heuristics) {
    const PlanPoint* p = smallest_feasible_of(r, h);
    if (p == nullptr) continue;
    if (!p->feasible()) {
      fmt::format_to(o, "  {:<10} none: {} even at the recorded peak\n", heuristic_name(h),
                     plan_outcome_name(p->outcome));
      continue;
    }
    fmt::format_to(o, "  {:<10} {:.2f} MiB ({} bytes), {} of the peak, slowdown {}x\n",
                   heuristic_name(h), to_mib(p->budget_bytes), p->budget_bytes,
                   fixed(p->fraction, 3), fixed(p->predicted_slowdown, 3));
  }
}

constexpr size_t kPeakRows = 10;

void format_peak(const PlanReport& r, std::string& out) {
  if (r.peak_by_op.empty()) return;
  auto o = std::back_inserter(out);
  int64_t total = 0;
  for (const PeakShare& s : r.peak_by_op) total += s.bytes;
  auto share = [&](int64_t bytes) { return total > 0 ? 100.0 * double(bytes) / double(total) : 0.0; };
  out += "\nresident at the unbudgeted peak, by producing op:\n";
  size_t shown = std::min(r.peak_by_op.size(), kPeakRows);
  // The op column fits the longest name shown (scaled_dot_product_attention_backward).
  size_t w = 24;
  for (size_t i = 0; i < shown; ++i) w = std::max(w, r.peak_by_op[i].op.size());
  fmt::format_to(o, "  {:<{}} {:>10} {:>9} {:>6}\n", "op", w, "MiB", "storages", "share");
  for (size_t i = 0; i < shown; ++i) {
    const PeakShare& s = r.peak_by_op[i];
    fmt::format_to(o, "  {:<{}} {:>10.2f} {:>9} {:>5.1f}%\n", s.op, w, to_mib(s.bytes), s.storages,
                   share(s.bytes));
  }
  if (r.peak_by_op.size() > shown) {
    int64_t bytes = 0, storages = 0;
    for (size_t i = shown; i < r.peak_by_op.size(); ++i) {
      bytes += r.peak_by_op[i].bytes;
      storages += r.peak_by_op[i].storages;
    }
    fmt::format_to(o, "  {:<{}} {:>10.2f} {:>9} {:>5.1f}%\n",
                   fmt::format("({} more ops)", r.peak_by_op.size() - shown), w, to_mib(bytes),
                   storages, share(bytes));
  }
}

// ---------------------------------------------------------------- SVG helpers

// The length of the UTF-8 sequence starting at text[i] when it encodes a
// character XML 1.0 allows beyond ASCII; 0 when it is malformed (overlong,
// truncated, a surrogate, past U+10FFFF) or U+FFFE/U+FFFF.
size_t utf8_char_length(std::string_view text, size_t i) {
  auto c = static_cast<unsigned char>(text[i]);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    auto d = static_cast<unsigned char>(text[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (d & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

// Text for XML character data and attribute values: the five special
// characters as entities, control characters XML 1.0 forbids as spaces,
// bytes that are not UTF-8 as U+FFFD, so that any op name or error message
// leaves the document well-formed.
std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      size_t n = utf8_char_length(text, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      } else {
        out.append(text.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

// A coordinate as written into the document: finite always.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }
std::string num(double v) { return fmt::format("{:.2f}", finite(v)); }

// An axis mapping [lo, hi] onto pixels [p0, p1]; a degenerate or
// non-finite range becomes [lo, lo + 1], values are clamped to the range.
struct LinearScale {
  double lo, hi, p0, p1;
  LinearScale(double lo_, double hi_, double p0_, double p1_)
      : lo(finite(lo_)), hi(finite(hi_)), p0(p0_), p1(p1_) {
    if (!(hi > lo)) hi = lo + 1;
  }
  double operator()(double v) const {
    v = std::clamp(finite(v), lo, hi);
    return p0 + (v - lo) / (hi - lo) * (p1 - p0);
  }
};

// Slowdown on a log scale from 1 to `hi`: equal ratios, equal distances.
struct LogScale {
  double hi, p0, p1;
  LogScale(double hi_, double p0_, double p1_) : hi(hi_), p0(p0_), p1(p1_) {
    if (!std::isfinite(hi) || !(hi > 1.0001)) hi = 1.0001;
  }
  double operator()(double v) const {
    v = std::clamp(std::isfinite(v) ? v : hi, 1.0, hi);
    return p0 + std::log(v) / std::log(hi) * (p1 - p0);
  }
};

// A "nice" tick step (1, 2 or 5 × 10^k) giving about `ticks` ticks over `span`.
double nice_step(double span, int ticks) {
  if (!std::isfinite(span) || span <= 0) return 1;
  double raw = span / ticks;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

// Tick label: no trailing zeros beyond what the step needs.
std::string tick_label(double v, double step) {
  int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  return fmt::format("{:.{}f}", v, std::clamp(decimals, 0, 6));
}

// The indices of `values` a polyline keeps: all of them up to `max_points`,
// else for each of max_points / 2 consecutive buckets its minimum and its
// maximum, in order, so the peak (and every trough) survives.
std::vector<size_t> downsample(const std::vector<int64_t>& values, size_t max_points) {
  size_t n = values.size();
  std::vector<size_t> keep;
  if (n <= max_points) {
    keep.resize(n);
    for (size_t i = 0; i < n; ++i) keep[i] = i;
    return keep;
  }
  size_t buckets = max_points / 2;
  keep.reserve(2 * buckets);
  for (size_t b = 0; b < buckets; ++b) {
    size_t begin = b * n / buckets, end = (b + 1) * n / buckets;
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (values[i] < values[lo]) lo = i;
      if (values[i] > values[hi]) hi = i;
    }
    keep.push_back(std::min(lo, hi));
    if (lo != hi) keep.push_back(std::max(lo, hi));
  }
  return keep;
}

constexpr size_t kMaxPolylinePoints = 2000;

// Okabe-Ito: distinguishable with the common colour-vision deficiencies.
constexpr std::string_view kPalette[] = {"#0072B2", "#D55E00", "#009E73",
                                         "#CC79A7", "#E69F00", "#56B4E9"};
std::string_view colour(size_t i) { return kPalette[i % std::size(kPalette)]; }

constexpr double kWidth = 960;
constexpr double kLeft = 80, kRight = 760;  // plot area of both panels; legend to the right
constexpr double kChartTop = 60, kChartBottom = 380;
constexpr double kTimelineTop = 490, kTimelineBottom = 810;
constexpr double kHeight = 880;

struct Svg {
  std::string out;
  template <typename... Args>
  void add(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
    out += '\n';
  }
  void text(double x, double y, std::string_view s, std::string_view attrs = {}) {
    add(R"(<text x="{}" y="{}"{}{}>{}</text>)", num(x), num(y), attrs.empty() ? "" : " ", attrs,
        xml_escape(s));
  }
  void line(double x1, double y1, double x2, double y2, std::string_view attrs) {
    add(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" {}/>)", num(x1), num(y1), num(x2), num(y2),
        attrs);
  }
};

// A plot's frame, horizontal grid lines and y labels, x labels.
void axes(Svg& svg, double top, double bottom, const std::vector<std::pair<double, std::string>>& y_ticks,
          const std::vector<std::pair<double, std::string>>& x_ticks, std::string_view x_title,
          std::string_view y_title) {
  svg.add(R"(<rect class="frame" x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>)",
          num(kLeft), num(top), num(kRight - kLeft), num(bottom - top));
  for (const auto& [y, label] : y_ticks) {
    svg.line(kLeft, y, kRight, y, R"(stroke="#ddd")");
    svg.text(kLeft - 6, y + 4, label, R"(text-anchor="end")");
  }
  for (const auto& [x, label] : x_ticks) {
    svg.line(x, bottom, x, bottom + 5, R"(stroke="#444")");
    svg.text(x, bottom + 18, label, R"(text-anchor="middle")");
  }
  svg.text((kLeft + kRight) / 2, bottom + 36, x_title, R"(text-anchor="middle")");
  double my = (top + bottom) / 2;
  svg.add(R"svg(<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>)svg",
          num(kLeft - 52), num(my), num(kLeft - 52), num(my), xml_escape(y_title));
}

// Legend rows to the right of a plot, from `top` down.
struct Legend {
  Svg& svg;
  double y;
  static constexpr double kX = kRight + 16;
  void row(std::string_view swatch, std::string_view label) {
    svg.add("{}", swatch);
    svg.text(kX + 28, y + 4, label);
    y += 18;
  }
  std::string line_swatch(std::string_view attrs) const {
    return fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" {}/>)", num(kX), num(y),
                       num(kX + 22), num(y), attrs);
  }
};

std::string cross(double x, double y, std::string_view colour, std::string_view cls) {
  return fmt::format(R"(<path class="{}" d="M{} {} l8 8 m0 -8 l-8 8" stroke="{}" stroke-width="2" fill="none"/>)",
                     cls, num(x - 4), num(y - 4), colour);
}
std::string triangle(double x, double y, std::string_view colour, std::string_view cls) {
  return fmt::format(R"(<polygon class="{}" points="{},{} {},{} {},{}" fill="{}"/>)", cls, num(x),
                     num(y - 5), num(x - 5), num(y + 4), num(x + 5), num(y + 4), colour);
}
std::string diamond(double x, double y, std::string_view colour, std::string_view cls) {
  return fmt::format(
      R"(<polygon class="{}" points="{},{} {},{} {},{} {},{}" fill="white" stroke="{}" stroke-width="2"/>)",
      cls, num(x), num(y - 7), num(x + 7), num(y), num(x), num(y + 7), num(x - 7), num(y), colour);
}

// `element` (one self-closing tag) with a <title> child, which viewers show
// on hover.
std::string with_tooltip(std::string element, std::string_view text) {
  DTR_INTERNAL_ASSERT(element.size() > 3 && element.ends_with("/>"), "not a self-closing tag: {}",
                      element);
  std::string name = element.substr(1, element.find(' ') - 1);
  element.resize(element.size() - 2);
  return fmt::format("{}><title>{}</title></{}>", element, xml_escape(text), name);
}

// What one point is, in a line.
std::string tooltip(const PlanPoint& p) {
  std::string head = fmt::format("{} at {} of the peak ({:.2f} MiB)", heuristic_name(p.heuristic),
                                 fixed(p.fraction, 3), to_mib(p.budget_bytes));
  if (!p.feasible()) {
    return fmt::format("{}: {}: {}", head, plan_outcome_name(p.outcome), first_line(p.error, 200));
  }
  return fmt::format("{}: slowdown {}x, {} evictions, {} replays, peak {:.2f} MiB", head,
                     fixed(p.predicted_slowdown, 3), p.evictions, p.recomputed_ops,
                     to_mib(p.peak_bytes));
}

// ---------------------------------------------------------------- labels

// How a label's text sits on its x: starting there, centred, or ending there.
enum class Anchor { kStart, kMiddle, kEnd };

// A rectangle of the picture: x0 ≤ x1 and y0 ≤ y1 (y grows downward).
struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool inside(const Box& o) const { return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1; }
};

// The box a line of text covers, estimated for a sans-serif font: 0.64 em
// a character (DejaVu Sans' digits are 0.636 em wide, most of its letters
// narrower), 0.8 em above the baseline and 0.25 em below. A viewer whose
// font runs wider may still touch a neighbour; the estimate errs wide.
constexpr double kEmPerChar = 0.64, kAscent = 0.8, kDescent = 0.25;
Box text_box(double x, double y, std::string_view text, double size, Anchor anchor) {
  // Characters, not bytes: UTF-8 continuation bytes do not count.
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  const double w = kEmPerChar * size * double(chars);
  const double x0 = anchor == Anchor::kStart ? x : anchor == Anchor::kEnd ? x - w : x - w / 2;
  return {x0, y - kAscent * size, x0 + w, y + kDescent * size};
}

// Where a label may go: its baseline's anchor point.
struct Spot {
  double x, y;
  Anchor anchor;
};

// The labels of one plot, none over another: each label goes to the first
// of its candidate spots (in order of preference) whose box lies within the
// plot and overlaps no label placed before it, preferring one that also
// keeps off the reserved marks (markers, lines, notes); where every spot
// within the plot meets a label, to the one that covers labels least.
// Labels placed first get the best spots, so the more important go first.
class Labels {
 public:
  Labels(Svg& svg, Box bounds) : svg_(svg), bounds_(bounds) {}

  /// Keeps labels off `b`: text drawn already (`text`: as off any label),
  /// else a marker or a line (where they can be).
  void reserve(const Box& b, bool text = false) { (text ? labels_ : marks_).push_back(b); }

  /// Whether `b` lies within the plot and off every label (and mark, with `marks`).
  bool clear(const Box& b, bool marks = true) const {
    return b.inside(bounds_) && covered(labels_, b) == 0 && (!marks || covered(marks_, b) == 0);
  }

  /// Writes `text` at `size` px at the best spot of `spots`, with `attrs`
  /// (fill, id, ...) on the element; returns the box it covers.
  Box place(std::string_view text, double size, const std::vector<Spot>& spots,
            std::string_view attrs = {}) {
    DTR_INTERNAL_ASSERT(!spots.empty(), "a label with nowhere to go: {}", text);
    auto box = [&](const Spot& s) { return text_box(s.x, s.y, text, size, s.anchor); };
    auto first_where = [&](auto ok) -> const Spot* {
      for (const Spot& s : spots) {
        if (ok(box(s))) return &s;
      }
      return nullptr;
    };
    const Spot* chosen = first_where([&](const Box& b) { return clear(b); });
    if (chosen == nullptr) chosen = first_where([&](const Box& b) { return clear(b, false); });
    if (chosen == nullptr) {  // every spot meets a label or leaves the plot: the least covering
      double best = std::numeric_limits<double>::infinity();
      for (const Spot& s : spots) {
        const Box b = box(s);
        const double cost = covered(labels_, b) + (b.inside(bounds_) ? 0 : 1e6);
        if (cost < best) best = cost, chosen = &s;
      }
    }
    labels_.push_back(box(*chosen));
    const std::string_view anchor = chosen->anchor == Anchor::kStart    ? ""
                                    : chosen->anchor == Anchor::kMiddle ? R"( text-anchor="middle")"
                                                                        : R"( text-anchor="end")";
    svg_.text(chosen->x, chosen->y, text,
              fmt::format(R"(font-size="{}"{}{}{})", num(size), anchor, attrs.empty() ? "" : " ", attrs));
    return labels_.back();
  }

 private:
  // The area of `b` that `boxes` cover (counted again where they overlap).
  static double covered(const std::vector<Box>& boxes, const Box& b) {
    double area = 0;
    for (const Box& t : boxes) {
      if (t.overlaps(b)) area += (std::min(t.x1, b.x1) - std::max(t.x0, b.x0)) * (std::min(t.y1, b.y1) - std::max(t.y0, b.y0));
    }
    return area;
  }

  Svg& svg_;
  Box bounds_;
  std::vector<Box> labels_, marks_;
};

// Spots beside a marker at (x, y) of radius `r`, nearest first: above
// right, above left, below right, below left, centred above and below, then
// the same moved away, 14 px a step up or down and 20 px a step sideways.
std::vector<Spot> beside(double x, double y, double r) {
  std::vector<std::pair<double, Spot>> ranked;  // (distance moved, spot)
  for (int k = 0; k < 8; ++k) {
    const double up = y - r - 2 - 14.0 * k, down = y + r + 11 + 14.0 * k;
    for (int j = 0; j < 6; ++j) {
      const double dx = r + 2 + 20.0 * j, moved = 14.0 * k + 20.0 * j;
      ranked.push_back({moved, {x + dx, up, Anchor::kStart}});
      ranked.push_back({moved, {x - dx, up, Anchor::kEnd}});
      ranked.push_back({moved + 1, {x + dx, down, Anchor::kStart}});
      ranked.push_back({moved + 1, {x - dx, down, Anchor::kEnd}});
    }
    ranked.push_back({14.0 * k + 2, {x, up - 1, Anchor::kMiddle}});
    ranked.push_back({14.0 * k + 3, {x, down + 1, Anchor::kMiddle}});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Spot> spots;
  for (const auto& [moved, spot] : ranked) spots.push_back(spot);
  return spots;
}

// Spots along a vertical line at x, from `y` stepping by `step` px (up
// when negative): right of the line, then left.
std::vector<Spot> along(double x, double y, double step) {
  std::vector<Spot> spots;
  for (int k = 0; k < 12; ++k) {
    spots.push_back({x + 4, y + step * k, Anchor::kStart});
    spots.push_back({x - 4, y + step * k, Anchor::kEnd});
  }
  return spots;
}

Box square(double x, double y, double r) { return {x - r, y - r, x + r, y + r}; }

// ---------------------------------------------------------------- chart (a)

void slowdown_chart(const PlanReport& r, const std::vector<Heuristic>& heuristics, double max_slowdown,
                    Svg& svg) {
  // The band above the plot where infeasible budgets are marked, one row
  // per heuristic so that markers at one budget do not hide each other.
  constexpr double kBandTop = kChartTop + 2, kRow = 11;
  const double band_height = kRow * double(std::max<size_t>(heuristics.size(), 1)) + 4;
  auto band_y = [&](size_t i) { return kBandTop + 2 + kRow * (double(i) + 0.5); };
  const double plot_top = kBandTop + band_height + 10;
  auto usable = [](const PlanPoint& p) { return std::isfinite(p.fraction) && p.fraction >= 0; };
  // The threshold is always on the chart.
  double x_hi = 1, y_hi = std::max(1.5, max_slowdown * 1.05);
  bool any_feasible = false, any_below_peak = false;
  for (const auto* list : {&r.points, &r.smallest_feasible}) {
    for (const PlanPoint& p : *list) {
      if (!usable(p)) continue;
      x_hi = std::max(x_hi, p.fraction);
      if (p.feasible()) {
        any_feasible = true;
        any_below_peak |= p.fraction < 1;
      }
      if (p.feasible() && std::isfinite(p.predicted_slowdown)) {
        y_hi = std::max(y_hi, p.predicted_slowdown * 1.05);
      }
    }
  }
  x_hi = std::ceil(x_hi * 10 - 1e-9) / 10;
  LinearScale x(0, x_hi, kLeft, kRight);
  LogScale y(y_hi, kChartBottom, plot_top);

  svg.text(kLeft, kChartTop - 24, "predicted slowdown against budget",
           R"(font-size="15" font-weight="bold")");
  svg.text(kLeft, kChartTop - 8,
           fmt::format("budget as a fraction of the recorded peak ({:.2f} MiB); slowdown on a log "
                       "scale; infeasible budgets above",
                       to_mib(r.peak_bytes)),
           R"(fill="#555")");

  // y ticks: 1, 1.1, 1.25, 1.5, 2, 3, 5, then 1-2-5 decades, at least 18 px apart.
  std::vector<double> candidates = {1, 1.05, 1.1, 1.25, 1.5, 2, 3, 5};
  for (double d = 10; d <= y.hi && candidates.size() < 64; d *= 10) {
    for (double m : {1.0, 2.0, 5.0}) candidates.push_back(m * d);
  }
  std::vector<std::pair<double, std::string>> y_ticks;
  for (double c : candidates) {
    if (c > y.hi) break;
    if (!y_ticks.empty() && y_ticks.back().first - y(c) < 18) continue;
    y_ticks.emplace_back(y(c), fmt::format("{}x", c));
  }
  std::vector<std::pair<double, std::string>> x_ticks;
  double x_step = x_hi > 1.5 ? 0.5 : 0.1;
  for (int i = 0; i * x_step <= x_hi + 1e-9; ++i) {
    x_ticks.emplace_back(x(i * x_step), tick_label(i * x_step, x_step));
  }
  axes(svg, plot_top, kChartBottom, y_ticks, x_ticks, "budget / recorded peak",
       "predicted slowdown");
  svg.add(R"(<rect class="infeasible-band" x="{}" y="{}" width="{}" height="{}" fill="#eee"/>)",
          num(kLeft), num(kBandTop), num(kRight - kLeft), num(band_height));
  svg.text(kLeft - 6, kBandTop + band_height / 2 + 4, "infeasible",
           R"(text-anchor="end" fill="#555" font-size="10")");

  Labels labels(svg, {kLeft + 2, plot_top + 2, kRight - 2, kChartBottom - 2});
  // The threshold choose_budget applies, and the budget it picks: the
  // first heuristic's smallest budget at or under the line.
  const double ty = y(max_slowdown);
  svg.line(kLeft, ty, kRight, ty, R"(id="max-slowdown" stroke="#444" stroke-dasharray="2 3" stroke-width="1.5")");
  labels.reserve({kLeft, ty - 1, kRight, ty + 1});  // no label is struck through by a line
  const std::optional<int64_t> pick = choose_budget(r, max_slowdown);
  const PlanPoint* picked = nullptr;
  if (pick) {
    for (const auto* list : {&r.points, &r.smallest_feasible}) {
      for (const PlanPoint& p : *list) {
        if (p.heuristic != heuristics.front() || !p.feasible() || !usable(p) || p.budget_bytes != *pick) continue;
        if (picked == nullptr || p.predicted_slowdown < picked->predicted_slowdown) picked = &p;
      }
    }
  }
  double pick_x = 0, pick_y = 0;
  if (picked != nullptr) {
    pick_x = x(picked->fraction), pick_y = y(picked->predicted_slowdown);
    svg.line(pick_x, plot_top, pick_x, kChartBottom,
             fmt::format(R"(id="auto-pick" stroke="{}" stroke-dasharray="1 3" stroke-width="1.5")", colour(0)));
    labels.reserve({pick_x - 1, plot_top, pick_x + 1, kChartBottom});
  }
  std::string floor_text;
  double floor_x = 0;
  if (r.peak_bytes > 0 && r.floor_bytes > 0) {
    floor_x = x(double(r.floor_bytes) / double(r.peak_bytes));
    svg.line(floor_x, plot_top, floor_x, kChartBottom,
             R"(id="floor" stroke="#000" stroke-dasharray="5 4" stroke-width="1.5")");
    floor_text = fmt::format("floor {:.2f} MiB", to_mib(r.floor_bytes));
    labels.reserve({floor_x - 1, plot_top, floor_x + 1, kChartBottom});
  }

  // The curves, the first heuristic's (choose_budget's) last: it is drawn
  // over the others, heavier and on a white halo, so none hides it.
  std::vector<size_t> order;
  for (size_t i = 1; i < heuristics.size(); ++i) order.push_back(i);
  if (!heuristics.empty()) order.push_back(0);
  std::vector<std::pair<size_t, const PlanPoint*>> smallest;  // (heuristic index, point) to label
  for (size_t i : order) {
    const Heuristic h = heuristics[i];
    const bool first = i == 0;
    std::string name = xml_escape(heuristic_name(h));
    std::vector<const PlanPoint*> line;
    for (const PlanPoint& p : r.points) {
      if (p.heuristic != h || !usable(p)) continue;
      if (p.feasible()) {
        line.push_back(&p);
      } else if (p.outcome == PlanOutcome::kThrash) {
        svg.add("{}", with_tooltip(triangle(x(p.fraction), band_y(i), colour(i), "infeasible thrash"),
                                   tooltip(p)));
      } else {
        svg.add("{}", with_tooltip(cross(x(p.fraction), band_y(i), colour(i), "infeasible out-of-memory"),
                                   tooltip(p)));
      }
    }
    std::stable_sort(line.begin(), line.end(),
                     [](const PlanPoint* a, const PlanPoint* b) { return a->fraction < b->fraction; });
    std::string points;
    for (const PlanPoint* p : line) {
      if (!points.empty()) points += ' ';
      points += fmt::format("{},{}", num(x(p->fraction)), num(y(p->predicted_slowdown)));
    }
    if (first) {
      svg.add(R"(<polyline class="halo" points="{}" fill="none" stroke="white" stroke-width="7"/>)", points);
    }
    svg.add(R"(<polyline id="slowdown-{}" class="slowdown" points="{}" fill="none" stroke="{}" stroke-width="{}"/>)",
            name, points, colour(i), first ? 3.5 : 2);
    const double radius = first ? 4.5 : 3.5;
    for (const PlanPoint* p : line) {
      const double px = x(p->fraction), py = y(p->predicted_slowdown);
      svg.add("{}", with_tooltip(fmt::format(R"(<circle class="point" cx="{}" cy="{}" r="{}" fill="{}"{}/>)",
                                             num(px), num(py), num(radius), colour(i),
                                             first ? R"( stroke="white" stroke-width="1")" : ""),
                                 tooltip(*p)));
      labels.reserve(square(px, py, radius));
    }
    const PlanPoint* best = smallest_feasible_of(r, h);
    if (best != nullptr && best->feasible() && usable(*best)) {
      const double bx = x(best->fraction), by = y(best->predicted_slowdown);
      svg.add("{}", with_tooltip(diamond(bx, by, colour(i), "smallest-feasible"),
                                 "smallest feasible: " + tooltip(*best)));
      labels.reserve(square(bx, by, 7));
      smallest.emplace_back(i, best);
    }
  }
  if (picked != nullptr) {
    svg.add("{}", with_tooltip(fmt::format(R"(<circle id="auto-pick-point" cx="{}" cy="{}" r="9" fill="none" stroke="{}" stroke-width="2"/>)",
                                           num(pick_x), num(pick_y), colour(0)),
                               fmt::format("choose_budget at max slowdown {}x: {}", max_slowdown, tooltip(*picked))));
    labels.reserve(square(pick_x, pick_y, 9));
  }

  // The labels, most important first: the pick, the threshold, why there
  // is no curve (if so), the first heuristic's smallest feasible budget,
  // the floor, the others'.
  if (picked != nullptr) {
    labels.place(fmt::format("auto: {:.2f} MiB", to_mib(picked->budget_bytes)), 11,
                 along(pick_x, plot_top + 14, 14),
                 fmt::format(R"(id="auto-pick-label" font-weight="bold" fill="{}")", colour(0)));
  }
  labels.place(pick || !any_feasible ? fmt::format("max slowdown {}x", max_slowdown)
                                     : fmt::format("max slowdown {}x: no budget within it", max_slowdown),
               11,
               {{kRight - 4, ty - 5, Anchor::kEnd}, {kRight - 4, ty + 14, Anchor::kEnd},
                {kLeft + 4, ty - 5, Anchor::kStart}, {kLeft + 4, ty + 14, Anchor::kStart}},
               R"(id="max-slowdown-label" fill="#444")");
  // A chart with no curve says why, near the middle of the plot, off its lines.
  std::vector<std::string> why;
  if (r.points.empty() && r.smallest_feasible.empty()) {
    why.push_back("no budgets simulated");
  } else if (!any_feasible) {
    why.push_back("no budget simulated is feasible: each ran out of memory or thrashed");
  } else if (!any_below_peak) {
    why.push_back("no budget below the recorded peak is feasible");
  }
  if (!why.empty() && r.peak_bytes > 0 && r.floor_bytes > 0 && why.front() != "no budgets simulated") {
    why.push_back(fmt::format("the floor (bytes never evictable) is {:.2f} MiB, {:.3f} of the peak",
                              to_mib(r.floor_bytes), double(r.floor_bytes) / double(r.peak_bytes)));
  }
  const double mid_x = (kLeft + kRight) / 2;
  auto why_y = [&](size_t k, double dy) {
    return (plot_top + kChartBottom) / 2 + dy + 18.0 * (double(k) - double(why.size() - 1) / 2);
  };
  std::optional<double> why_dy;  // off the lines if it can be, else off the labels
  for (const bool marks : {true, false}) {
    for (double dy : {0.0, 30.0, -30.0, 60.0, -60.0, 90.0, -90.0}) {
      bool clear = !why_dy.has_value();
      for (size_t k = 0; k < why.size(); ++k) {
        clear = clear && labels.clear(text_box(mid_x, why_y(k, dy), why[k], 13, Anchor::kMiddle), marks);
      }
      if (clear) why_dy = dy;
    }
  }
  for (size_t k = 0; k < why.size(); ++k) {
    labels.place(why[k], 13, {{mid_x, why_y(k, why_dy.value_or(0)), Anchor::kMiddle}},
                 k == 0 ? R"(class="why-empty" fill="#333")" : R"(class="why-empty" fill="#555")");
  }

  // Smallest feasible budgets: one label for diamonds that coincide with the
  // same budget (heuristics often share their smallest feasible budget).
  std::vector<std::tuple<std::string, double, double>> labelled;
  auto label_smallest = [&](size_t i, const PlanPoint& p) {
    const std::string text = fmt::format("{:.2f} MiB", to_mib(p.budget_bytes));
    const double bx = x(p.fraction), by = y(p.predicted_slowdown);
    for (const auto& [t, lx, ly] : labelled) {
      if (t == text && std::abs(lx - bx) < 16 && std::abs(ly - by) < 16) return;
    }
    labelled.emplace_back(text, bx, by);
    const Box b = labels.place(text, 11, beside(bx, by, 7),
                               fmt::format(R"(class="smallest-feasible-label" fill="{}")", colour(i)));
    // A label moved away from its diamond gets a leader line to it.
    const double nx = std::clamp(bx, b.x0, b.x1), ny = std::clamp(by, b.y0, b.y1);
    const double d = std::hypot(nx - bx, ny - by);
    if (d > 16) {
      svg.line(bx + (nx - bx) * 8 / d, by + (ny - by) * 8 / d, nx, ny,
               fmt::format(R"(class="leader" stroke="{}" stroke-width="0.8")", colour(i)));
    }
  };
  for (const auto& [i, p] : smallest) {
    if (i == 0) label_smallest(i, *p);
  }
  if (!floor_text.empty()) labels.place(floor_text, 11, along(floor_x, kChartBottom - 6, -14), R"(id="floor-label")");
  for (const auto& [i, p] : smallest) {
    if (i != 0) label_smallest(i, *p);
  }

  Legend legend{svg, plot_top + 6};
  for (size_t i = 0; i < heuristics.size(); ++i) {
    legend.row(legend.line_swatch(fmt::format(R"(stroke="{}" stroke-width="{}")", colour(i), i == 0 ? 3.5 : 2)),
               i == 0 ? fmt::format("{} (auto)", heuristic_name(heuristics[i]))
                      : std::string(heuristic_name(heuristics[i])));
  }
  legend.y += 6;
  legend.row(diamond(Legend::kX + 11, legend.y, "#444", "legend"), "smallest feasible");
  legend.row(fmt::format(R"(<circle class="legend" cx="{}" cy="{}" r="7" fill="none" stroke="{}" stroke-width="2"/>)",
                         num(Legend::kX + 11), num(legend.y), colour(0)),
             "auto's pick");
  legend.row(legend.line_swatch(R"(stroke="#444" stroke-dasharray="2 3" stroke-width="1.5")"), "max slowdown");
  legend.row(cross(Legend::kX + 11, legend.y, "#444", "legend"), "out of memory");
  legend.row(triangle(Legend::kX + 11, legend.y, "#444", "legend"), "thrash");
  legend.row(legend.line_swatch(R"(stroke="#000" stroke-dasharray="5 4")"), "floor");
}

// ---------------------------------------------------------------- timeline (b)

int64_t tick_at(const PlanTimeline& t, size_t i) {
  return i < t.tick.size() ? t.tick[i] : int64_t(i) + 1;
}

// The index of the first maximum of t.resident_bytes; nullopt when empty.
std::optional<size_t> peak_index(const PlanTimeline& t) {
  if (t.resident_bytes.empty()) return std::nullopt;
  return size_t(std::max_element(t.resident_bytes.begin(), t.resident_bytes.end()) -
                t.resident_bytes.begin());
}

template <typename XScale, typename YScale>
std::string polyline_points(const PlanTimeline& t, const XScale& x, const YScale& y) {
  std::string points;
  for (size_t i : downsample(t.resident_bytes, kMaxPolylinePoints)) {
    if (!points.empty()) points += ' ';
    points += fmt::format("{},{}", num(x(double(tick_at(t, i)))), num(y(double(t.resident_bytes[i]))));
  }
  return points;
}

// Short ticks at `y` (pointing up) in every pixel column holding an op with
// counts[i] > 0: at most one per column, however many samples.
template <typename XScale>
std::string rug(const PlanTimeline& t, const std::vector<int32_t>& counts, const XScale& x,
                double y) {
  std::string d;
  long last = std::numeric_limits<long>::min();
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] <= 0) continue;
    long px = std::lround(x(double(tick_at(t, i))));
    if (px == last) continue;
    last = px;
    d += fmt::format("M{} {}v-7", px, num(y));
  }
  return d;
}

int64_t total(const std::vector<int32_t>& v) {
  int64_t s = 0;
  for (int32_t c : v) s += std::max(c, 0);
  return s;
}

void timeline_chart(const PlanReport& r, Svg& svg) {
  const PlanTimeline& ub = r.unbudgeted;
  const PlanTimeline& b = r.budgeted;
  constexpr double kPlotTop = kTimelineTop;
  constexpr double kPlotBottom = kTimelineBottom - 30;  // a strip below for the rug
  int64_t x_hi = 1, y_hi = 0;
  for (const PlanTimeline* t : {&ub, &b}) {
    for (size_t i = 0; i < t->resident_bytes.size(); ++i) {
      x_hi = std::max(x_hi, tick_at(*t, i));
      y_hi = std::max(y_hi, t->resident_bytes[i]);
    }
  }
  if (b.budget_bytes > 0) y_hi = std::max(y_hi, b.budget_bytes);
  double y_hi_mib = std::max(to_mib(y_hi) * 1.08, 1.0);
  double y_step = nice_step(y_hi_mib, 5);
  y_hi_mib = std::ceil(y_hi_mib / y_step) * y_step;
  LinearScale x(0, double(x_hi), kLeft, kRight);
  LinearScale y_mib(0, y_hi_mib, kPlotBottom, kPlotTop);
  auto y = [&](double bytes) { return y_mib(bytes / kMiB); };

  svg.text(kLeft, kTimelineTop - 40, "memory timeline of the step",
           R"(font-size="15" font-weight="bold")");
  std::string sub = "resident bytes after each op, over the logical clock";
  if (!b.resident_bytes.empty()) {
    sub += fmt::format("; at the budget: {} evictions, {} replays", total(b.evictions),
                       total(b.replays));
  }
  svg.text(kLeft, kTimelineTop - 24, sub, R"(fill="#555")");

  std::vector<std::pair<double, std::string>> y_ticks, x_ticks;
  for (int i = 0; i * y_step <= y_hi_mib + 1e-9; ++i) {
    y_ticks.emplace_back(y_mib(i * y_step), tick_label(i * y_step, y_step));
  }
  double x_step = std::max(1.0, nice_step(double(x_hi), 8));
  for (int i = 0; i * x_step <= double(x_hi) + 1e-9; ++i) {
    x_ticks.emplace_back(x(i * x_step), tick_label(i * x_step, x_step));
  }
  svg.add(R"(<rect class="rug" x="{}" y="{}" width="{}" height="{}" fill="#f6f6f6"/>)", num(kLeft),
          num(kPlotBottom), num(kRight - kLeft), num(kTimelineBottom - kPlotBottom));
  axes(svg, kPlotTop, kTimelineBottom, y_ticks, x_ticks, "op tick (logical clock)",
       "resident MiB");
  svg.line(kLeft, kPlotBottom, kRight, kPlotBottom, R"(stroke="#444")");

  if (ub.resident_bytes.empty() && b.resident_bytes.empty()) {
    svg.text((kLeft + kRight) / 2, (kPlotTop + kPlotBottom) / 2, "no timeline recorded",
             R"(text-anchor="middle" fill="#555")");
  }
  constexpr std::string_view kUnbudgeted = "#777", kBudgeted = "#0072B2", kBudget = "#D55E00",
                             kEvict = "#D55E00", kReplay = "#009E73";
  if (b.budget_bytes > 0) {
    svg.line(kLeft, y(double(b.budget_bytes)), kRight, y(double(b.budget_bytes)),
             fmt::format(R"(id="timeline-budget" stroke="{}" stroke-dasharray="6 4")", kBudget));
  }
  svg.add(R"(<polyline id="timeline-unbudgeted" class="timeline" points="{}" fill="none" stroke="{}" stroke-width="1.5"/>)",
          polyline_points(ub, x, y), kUnbudgeted);
  svg.add(R"(<polyline id="timeline-budgeted" class="timeline" points="{}" fill="none" stroke="{}" stroke-width="1.5"/>)",
          polyline_points(b, x, y), kBudgeted);
  svg.add(R"(<path id="timeline-evictions" d="{}" stroke="{}" fill="none"/>)",
          rug(b, b.evictions, x, kPlotBottom + 12), kEvict);
  svg.add(R"(<path id="timeline-replays" d="{}" stroke="{}" fill="none"/>)",
          rug(b, b.replays, x, kPlotBottom + 26), kReplay);
  svg.text(kRight + 4, kPlotBottom + 12, "evictions", R"(font-size="10" fill="#555")");
  svg.text(kRight + 4, kPlotBottom + 26, "replays", R"(font-size="10" fill="#555")");

  Labels labels(svg, {kLeft + 2, kPlotTop + 2, kRight - 2, kPlotBottom - 2});
  if (std::optional<size_t> i = peak_index(b)) {
    double px = x(double(tick_at(b, *i))), py = y(double(b.resident_bytes[*i]));
    svg.add(R"(<circle id="timeline-budgeted-peak" cx="{}" cy="{}" r="3.5" fill="{}"/>)", num(px),
            num(py), kBudgeted);
  }
  if (std::optional<size_t> i = peak_index(ub)) {
    int64_t peak = ub.resident_bytes[*i];
    double px = x(double(tick_at(ub, *i))), py = y(double(peak));
    svg.add(R"(<circle id="timeline-peak" cx="{}" cy="{}" r="4" fill="none" stroke="#000" stroke-width="1.5"/>)",
            num(px), num(py));
    std::vector<std::string> lines = {
        fmt::format("peak {:.2f} MiB at tick {}", to_mib(peak), tick_at(ub, *i))};
    for (size_t k = 0; k < r.peak_by_op.size() && k < 5; ++k) {
      const PeakShare& s = r.peak_by_op[k];
      lines.push_back(fmt::format("{}: {:.2f} MiB ({} storages)", s.op, to_mib(s.bytes), s.storages));
    }
    double text_w = 0;
    for (const std::string& l : lines) {
      const Box t = text_box(0, 0, l, 11, Anchor::kStart);
      text_w = std::max(text_w, t.x1 - t.x0);
    }
    double w = text_w + 12, h = 15.0 * double(lines.size()) + 8;
    bool left = px > (kLeft + kRight) / 2;  // the box goes toward the middle
    double bx = std::clamp(left ? px - 10 - w : px + 10, kLeft + 2, kRight - 2 - w);
    double by = std::clamp(py + 8, kPlotTop + 2, kPlotBottom - 2 - h);
    svg.add(R"(<g id="timeline-peak-note"><rect x="{}" y="{}" width="{}" height="{}" fill="white" fill-opacity="0.9" stroke="#999"/>)",
            num(bx), num(by), num(std::max(w, 0.0)), num(std::max(h, 0.0)));
    for (size_t k = 0; k < lines.size(); ++k) {
      svg.text(bx + 6, by + 16 + 15.0 * double(k), lines[k],
               k == 0 ? R"(font-weight="bold" font-size="11")" : R"(font-size="11")");
    }
    svg.add("</g>");
    labels.reserve({bx, by, bx + w, by + h}, /*text=*/true);
  }
  if (b.budget_bytes > 0) {  // its label on the line, clear of the peak's note
    const double yb = y(double(b.budget_bytes));
    std::vector<Spot> spots;
    for (double at : {1.0, 0.0, 2.0 / 3, 1.0 / 3}) {
      const double lx = kLeft + 4 + at * (kRight - kLeft - 8);
      const Anchor a = at == 1.0 ? Anchor::kEnd : Anchor::kStart;
      spots.push_back({lx, yb - 5, a});
      spots.push_back({lx, yb + 14, a});
    }
    labels.place(fmt::format("budget {:.2f} MiB", to_mib(b.budget_bytes)), 11, spots,
                 fmt::format(R"(id="timeline-budget-label" fill="{}")", kBudget));
  }

  Legend legend{svg, kPlotTop + 6};
  legend.row(legend.line_swatch(fmt::format(R"(stroke="{}" stroke-width="2")", kUnbudgeted)),
             "unbudgeted");
  legend.row(legend.line_swatch(fmt::format(R"(stroke="{}" stroke-width="2")", kBudgeted)),
             b.budget_bytes > 0 ? fmt::format("at {:.2f} MiB", to_mib(b.budget_bytes))
                                : std::string("budgeted"));
  legend.row(legend.line_swatch(fmt::format(R"(stroke="{}" stroke-dasharray="6 4")", kBudget)),
             "budget");
  legend.row(legend.line_swatch(fmt::format(R"(stroke="{}" stroke-width="6")", kEvict)),
             "evictions (rug)");
  legend.row(legend.line_swatch(fmt::format(R"(stroke="{}" stroke-width="6")", kReplay)),
             "replays (rug)");
}

}  // namespace

std::optional<int64_t> choose_budget(const PlanReport& report, double max_slowdown) {
  DTR_CHECK(max_slowdown >= 1, ValueError,
            "choose_budget: max_slowdown must be at least 1 (no budget runs faster than none), got {}",
            max_slowdown);
  std::vector<Heuristic> heuristics = heuristics_of(report);
  if (heuristics.empty()) return std::nullopt;
  Heuristic h = heuristics.front();
  std::optional<int64_t> best;
  auto consider = [&](const PlanPoint& p) {
    if (p.heuristic != h || !p.feasible() || p.budget_bytes <= 0) return;
    if (!(p.predicted_slowdown <= max_slowdown)) return;
    if (!best || p.budget_bytes < *best) best = p.budget_bytes;
  };
  for (const PlanPoint& p : report.points) consider(p);
  if (const PlanPoint* p = smallest_feasible_of(report, h)) consider(*p);
  return best;
}

std::string format_plan(const PlanReport& report) {
  std::vector<Heuristic> heuristics = heuristics_of(report);
  std::string out;
  format_header(report, out);
  format_floor(report, out);
  format_points(report, heuristics, out);
  format_smallest(report, heuristics, out);
  format_peak(report, out);
  return out;
}

std::string plan_svg(const PlanReport& report, double max_slowdown) {
  DTR_CHECK(max_slowdown >= 1, ValueError,
            "plan_svg: max_slowdown must be at least 1 (no budget runs faster than none), got {}",
            max_slowdown);
  std::vector<Heuristic> heuristics = heuristics_of(report);
  Svg svg;
  svg.add(R"(<?xml version="1.0" encoding="UTF-8" standalone="no"?>)");
  svg.add(R"(<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="12">)",
          num(kWidth), num(kHeight), num(kWidth), num(kHeight));
  std::string title = fmt::format("dtr budget plan on {}: recorded peak {:.2f} MiB, {} ops",
                                  report.device.str(), to_mib(report.peak_bytes), report.ops);
  svg.add("<title>{}</title>", xml_escape(title));
  svg.add(R"(<rect width="{}" height="{}" fill="white"/>)", num(kWidth), num(kHeight));
  svg.add(R"(<g id="slowdown-chart">)");
  slowdown_chart(report, heuristics, max_slowdown, svg);
  svg.add("</g>");
  svg.add(R"(<g id="timeline-chart">)");
  timeline_chart(report, svg);
  svg.add("</g>");
  svg.add("</svg>");
  return std::move(svg.out);
}

void write_plan_svg(const PlanReport& report, const std::string& path, double max_slowdown) {
  std::string doc = plan_svg(report, max_slowdown);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  DTR_CHECK(f != nullptr, ValueError, "write_plan_svg: cannot open '{}' for writing: {}", path,
            std::strerror(errno));
  int error = 0;
  if (std::fwrite(doc.data(), 1, doc.size(), f) != doc.size()) error = errno;
  if (std::fclose(f) != 0 && error == 0) error = errno;  // the buffered rest failed
  DTR_CHECK(error == 0, ValueError, "write_plan_svg: cannot write '{}': {}", path,
            std::strerror(error));
}

}  // namespace dtr::remat
