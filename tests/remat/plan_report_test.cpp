// The planner's report (remat/plan_report.cpp) on hand-built PlanReports:
// the table's rows and values, choose_budget's pick, and an SVG that a real
// XML parser (expat) accepts, with the elements the report promises and no
// non-finite coordinate, whatever the report holds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <expat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "dtr/dtr.h"
#include "remat/planner.h"
#include "testing.h"

namespace dtr::remat {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t{1} << 20;

// ---- hand-built reports ---------------------------------------------------------

PlanPoint point(Heuristic h, double fraction, PlanOutcome outcome, double slowdown = 1) {
  PlanPoint p;
  p.heuristic = h;
  p.fraction = fraction;
  p.budget_bytes = int64_t(std::llround(fraction * 100)) * kMiB;
  p.outcome = outcome;
  p.predicted_slowdown = slowdown;
  if (outcome == PlanOutcome::kFeasible) {
    p.peak_bytes = p.budget_bytes - kMiB;
  } else {
    p.error = fmt::format("{} at {} MiB\nsecond line", outcome == PlanOutcome::kThrash ? "thrash" : "oom",
                          p.budget_bytes / kMiB);
  }
  return p;
}

PlanTimeline timeline(int64_t budget, std::vector<int64_t> resident_mib) {
  PlanTimeline t;
  t.budget_bytes = budget;
  for (size_t i = 0; i < resident_mib.size(); ++i) {
    t.tick.push_back(int64_t(i) + 1);
    t.resident_bytes.push_back(resident_mib[i] * kMiB);
    t.evictions.push_back(i % 4 == 1 ? 2 : 0);
    t.replays.push_back(i % 5 == 2 ? 1 : 0);
  }
  return t;
}

// dtr_eq feasible down to 0.4 (thrash at 0.3, out of memory below), lru down
// to 0.5, size nowhere; one lru point among the dtr_eq ones.
PlanReport full_report() {
  PlanReport r;
  r.device = Device(kCPU);
  r.ops = 1234;
  r.events = 5678;
  r.peak_bytes = 100 * kMiB;
  r.start_resident_bytes = 20 * kMiB + 5;
  r.step_seconds = 0.5;
  r.kernel_seconds = 0.4;
  r.simulate_seconds = 0.0123;
  r.floor_bytes = 30 * kMiB;
  r.floor_constant_bytes = 20 * kMiB;
  r.floor_locked_bytes = 10 * kMiB;
  r.floor_op = "matmul";
  r.floor_members = {{12 * kMiB, "constant (parameter, input or optimizer state)"},
                     {6 * kMiB, "in use by 'matmul'"}};
  const double dtr_eq_slowdown[] = {1.0, 1.01, 1.02, 1.05, 1.1, 1.25, 1.3};
  for (int i = 0; i < 7; ++i) {
    r.points.push_back(point(Heuristic::kDtrEq, 1.0 - 0.1 * i, PlanOutcome::kFeasible, dtr_eq_slowdown[i]));
    if (i == 2) r.points.push_back(point(Heuristic::kLru, 0.45, PlanOutcome::kFeasible, 1.1));
  }
  PlanPoint& half = r.points[6];  // dtr_eq at 0.5
  half.evictions = 120;
  half.recomputed_ops = 300;
  half.rematerializations = 150;
  half.recomputed_flops = 12.5e9;
  half.recompute_seconds = 0.125;
  r.points.push_back(point(Heuristic::kDtrEq, 0.3, PlanOutcome::kThrash, 1.1));
  r.points.push_back(point(Heuristic::kDtrEq, 0.2, PlanOutcome::kOutOfMemory));
  r.points.push_back(point(Heuristic::kDtrEq, 0.1, PlanOutcome::kOutOfMemory));
  for (int i = 0; i < 10; ++i) {
    double f = 1.0 - 0.1 * i;
    r.points.push_back(point(Heuristic::kLru, f, i < 6 ? PlanOutcome::kFeasible : PlanOutcome::kOutOfMemory,
                             1 + 0.1 * i));
  }
  for (int i = 0; i < 10; ++i) {
    r.points.push_back(point(Heuristic::kSize, 1.0 - 0.1 * i, PlanOutcome::kOutOfMemory));
  }
  r.smallest_feasible = {point(Heuristic::kDtrEq, 0.35, PlanOutcome::kFeasible, 1.45),
                         point(Heuristic::kLru, 0.44, PlanOutcome::kFeasible, 1.6),
                         point(Heuristic::kSize, 1.0, PlanOutcome::kOutOfMemory)};
  r.unbudgeted = timeline(-1, {20, 40, 70, 100, 80, 60, 30, 20});
  r.budgeted = timeline(35 * kMiB, {20, 30, 35, 34, 35, 33, 25, 20, 20, 21});
  for (int i = 0; i < 12; ++i) {
    r.peak_by_op.push_back({fmt::format("op{}", i), (12 - i) * kMiB, 12 - i});
  }
  r.peak_by_op[1].op = "fancy<op>&'x\"";
  return r;
}

// The whitespace-separated words of `line`.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The line of `text` whose first words are `prefix`; "" when none is.
std::string line_starting(const std::string& text, const std::vector<std::string>& prefix) {
  for (const std::string& l : lines_of(text)) {
    std::vector<std::string> w = words(l);
    if (w.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), w.begin())) return l;
  }
  return "";
}

// ---- the table ---------------------------------------------------------------------

TEST(PlanReport, TableHeaderAndFloor) {
  std::string t = format_plan(full_report());
  EXPECT_NE(t.find("dtr plan on cpu: 1234 ops recorded (5678 runtime events)"), std::string::npos) << t;
  EXPECT_EQ(words(line_starting(t, {"recorded", "peak"})),
            (std::vector<std::string>{"recorded", "peak", "100.00", "MiB", "(104857600", "bytes)"}));
  EXPECT_EQ(words(line_starting(t, {"resident", "at", "start"})),
            (std::vector<std::string>{"resident", "at", "start", "20.00", "MiB", "(20971525", "bytes)"}));
  EXPECT_EQ(line_starting(t, {"step"}), "  step 0.5000 s, kernels 0.4000 s; all simulations 0.0123 s");
  EXPECT_NE(t.find("floor (never evictable): 30.00 MiB (31457280 bytes) = constants 20.00 MiB + "
                   "locked 10.00 MiB at 'matmul'; 0.300 of the peak"),
            std::string::npos)
      << t;
  EXPECT_EQ(words(line_starting(t, {"12.00", "MiB"})),
            (std::vector<std::string>{"12.00", "MiB", "12582912", "constant", "(parameter,", "input",
                                      "or", "optimizer", "state)"}));
}

TEST(PlanReport, TableRowsGroupedByHeuristic) {
  std::string t = format_plan(full_report());
  EXPECT_EQ(words(line_starting(t, {"dtr_eq", "0.500"})),
            (std::vector<std::string>{"dtr_eq", "0.500", "50.00", "feasible", "49.00", "120", "300",
                                      "150", "12.500", "0.1250", "1.250x"}))
      << t;
  // An infeasible row gives its outcome and the error's first line, no numbers.
  EXPECT_EQ(words(line_starting(t, {"dtr_eq", "0.300"})),
            (std::vector<std::string>{"dtr_eq", "0.300", "30.00", "thrash", "thrash", "at", "30", "MiB"}));
  EXPECT_EQ(words(line_starting(t, {"size", "0.100"})),
            (std::vector<std::string>{"size", "0.100", "10.00", "out_of_memory", "oom", "at", "10", "MiB"}));
  EXPECT_EQ(t.find("second line"), std::string::npos);
  // One row per point; each heuristic's rows together, in first-seen order,
  // the lru point listed among dtr_eq's shown with the other lru rows.
  std::vector<std::string> order;
  for (const std::string& l : lines_of(t)) {
    std::vector<std::string> w = words(l);
    if (w.size() >= 4 && (w[3] == "feasible" || w[3] == "thrash" || w[3] == "out_of_memory")) {
      order.push_back(w[0] + "@" + w[1]);
    }
  }
  ASSERT_EQ(order.size(), full_report().points.size()) << t;
  EXPECT_EQ(order[0], "dtr_eq@1.000");
  EXPECT_EQ(order[9], "dtr_eq@0.100");
  EXPECT_EQ(order[10], "lru@0.450");
  EXPECT_EQ(order[11], "lru@1.000");
  EXPECT_EQ(order[21], "size@1.000");
}

TEST(PlanReport, TableSmallestFeasibleAndPeakResidents) {
  std::string t = format_plan(full_report());
  EXPECT_NE(t.find("  dtr_eq     35.00 MiB (36700160 bytes), 0.350 of the peak, slowdown 1.450x\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  size       none: out_of_memory even at the recorded peak\n"), std::string::npos) << t;
  // Top 10 producers, then the rest summed: op10 (2 MiB) + op11 (1 MiB) of 78 MiB.
  EXPECT_EQ(words(line_starting(t, {"op0"})),
            (std::vector<std::string>{"op0", "12.00", "12", "15.4%"}));
  EXPECT_EQ(words(line_starting(t, {"fancy<op>&'x\""})),
            (std::vector<std::string>{"fancy<op>&'x\"", "11.00", "11", "14.1%"}));
  EXPECT_EQ(line_starting(t, {"op10"}), "");
  EXPECT_EQ(words(line_starting(t, {"(2", "more", "ops)"})),
            (std::vector<std::string>{"(2", "more", "ops)", "3.00", "3", "3.8%"}));
}

TEST(PlanReport, TableOfAnEmptyReport) {
  std::string t = format_plan(PlanReport{});
  EXPECT_NE(t.find("dtr plan on cpu: 0 ops recorded (0 runtime events)"), std::string::npos) << t;
  EXPECT_NE(t.find("budgets (predicted):\n  none simulated\n"), std::string::npos) << t;
  EXPECT_EQ(t.find("nan"), std::string::npos) << t;
}

TEST(PlanReport, OutcomeNames) {
  EXPECT_EQ(plan_outcome_name(PlanOutcome::kFeasible), "feasible");
  EXPECT_EQ(plan_outcome_name(PlanOutcome::kOutOfMemory), "out_of_memory");
  EXPECT_EQ(plan_outcome_name(PlanOutcome::kThrash), "thrash");
}

// ---- choose_budget -------------------------------------------------------------------

TEST(PlanReport, ChooseBudgetTakesTheFirstHeuristicsSmallestFeasibleUnderTheLimit) {
  PlanReport r = full_report();
  // dtr_eq only: lru's 45 MiB at 1.1x and the thrashing 30 MiB "at 1.1x" do not count.
  EXPECT_EQ(choose_budget(r, 1.25), 50 * kMiB);
  EXPECT_EQ(choose_budget(r, 1.2), 60 * kMiB);
  EXPECT_EQ(choose_budget(r, 1.3), 40 * kMiB);
  EXPECT_EQ(choose_budget(r, 1.45), 35 * kMiB);  // the bisection's result
  EXPECT_EQ(choose_budget(r, 1.0), 100 * kMiB);
  EXPECT_EQ(choose_budget(PlanReport{}, 2.0), std::nullopt);
  // A first heuristic with nothing feasible: none, whatever the limit.
  r.points.erase(r.points.begin(), r.points.begin() + 11);  // dtr_eq and the stray lru point
  r.smallest_feasible.erase(r.smallest_feasible.begin());
  std::rotate(r.points.begin(), r.points.begin() + 10, r.points.end());  // size first
  EXPECT_EQ(choose_budget(r, 1e9), std::nullopt);
}

TEST(PlanReport, ChooseBudgetRejectsALimitBelowOne) {
  PlanReport r = full_report();
  EXPECT_THROW(choose_budget(r, 0.5), ValueError);
  EXPECT_THROW(choose_budget(r, std::nan("")), ValueError);
  EXPECT_NE(testing::error_message<ValueError>([&] { choose_budget(r, 0.5); }).find("0.5"),
            std::string::npos);
}

// ---- the SVG, parsed ---------------------------------------------------------------

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // character data directly inside
  std::string attr(const std::string& a) const {
    auto it = attrs.find(a);
    return it == attrs.end() ? "" : it->second;
  }
};

struct Parsed {
  std::vector<Element> elements;  // document order; [0] is the root
  std::vector<size_t> open;
};

void on_start(void* data, const XML_Char* name, const XML_Char** attrs) {
  auto* p = static_cast<Parsed*>(data);
  Element e;
  e.name = name;
  for (size_t i = 0; attrs[i] != nullptr; i += 2) e.attrs[attrs[i]] = attrs[i + 1];
  p->open.push_back(p->elements.size());
  p->elements.push_back(std::move(e));
}
void on_end(void* data, const XML_Char*) { static_cast<Parsed*>(data)->open.pop_back(); }
void on_text(void* data, const XML_Char* s, int len) {
  auto* p = static_cast<Parsed*>(data);
  if (!p->open.empty()) p->elements[p->open.back()].text.append(s, size_t(len));
}

// Parses `doc` with expat; fails the test on any XML error.
Parsed parse(const std::string& doc) {
  Parsed p;
  XML_Parser parser = XML_ParserCreate("UTF-8");
  XML_SetUserData(parser, &p);
  XML_SetElementHandler(parser, on_start, on_end);
  XML_SetCharacterDataHandler(parser, on_text);
  XML_Status status = XML_Parse(parser, doc.data(), int(doc.size()), XML_TRUE);
  EXPECT_EQ(status, XML_STATUS_OK) << XML_ErrorString(XML_GetErrorCode(parser)) << " at line "
                                   << XML_GetCurrentLineNumber(parser);
  XML_ParserFree(parser);
  return p;
}

std::vector<const Element*> find_all(const Parsed& p, const std::string& name,
                                     const std::string& cls = "") {
  std::vector<const Element*> out;
  for (const Element& e : p.elements) {
    if (e.name != name) continue;
    if (!cls.empty()) {
      std::vector<std::string> classes = words(e.attr("class"));
      if (std::find(classes.begin(), classes.end(), cls) == classes.end()) continue;
    }
    out.push_back(&e);
  }
  return out;
}

const Element* by_id(const Parsed& p, const std::string& id) {
  for (const Element& e : p.elements) {
    if (e.attr("id") == id) return &e;
  }
  return nullptr;
}

struct Point {
  double x, y;
};
std::vector<Point> points_of(const Element& polyline) {
  std::vector<Point> out;
  for (const std::string& pair : words(polyline.attr("points"))) {
    size_t comma = pair.find(',');
    EXPECT_NE(comma, std::string::npos) << pair;
    out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
  }
  return out;
}

// The checks every document passes: SVG root with its namespace, a viewBox
// and a title; every geometric attribute made of finite numbers; no "nan"
// or "inf" as a word anywhere.
Parsed parse_valid_svg(const std::string& doc) {
  EXPECT_FALSE(std::regex_search(doc, std::regex(R"(\b(nan|inf)\b)", std::regex::icase)));
  Parsed p = parse(doc);
  if (p.elements.empty()) {
    ADD_FAILURE() << "no elements";
    return p;
  }
  const Element& root = p.elements[0];
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(root.attr("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(root.attr("version"), "1.1");
  EXPECT_EQ(words(root.attr("viewBox")).size(), 4u);
  // The document's title is the root's first child (markers carry titles of their own).
  if (p.elements.size() >= 2) {
    EXPECT_EQ(p.elements[1].name, "title");
    EXPECT_NE(p.elements[1].text.find("dtr budget plan"), std::string::npos);
  } else {
    ADD_FAILURE() << "no title";
  }
  const std::regex number(R"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)");
  for (const Element& e : p.elements) {
    for (const char* a : {"x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height",
                          "points", "d", "viewBox", "transform"}) {
      std::string v = e.attr(a);
      for (auto it = std::sregex_iterator(v.begin(), v.end(), number); it != std::sregex_iterator(); ++it) {
        EXPECT_TRUE(std::isfinite(std::stod(it->str()))) << e.name << " " << a << "=" << v;
      }
    }
  }
  return p;
}

TEST(PlanReport, SvgOfAFullReport) {
  PlanReport r = full_report();
  Parsed p = parse_valid_svg(plan_svg(r));
  // One slowdown polyline per heuristic, through its feasible points only.
  std::vector<const Element*> lines = find_all(p, "polyline", "slowdown");
  ASSERT_EQ(lines.size(), 3u);
  ASSERT_NE(by_id(p, "slowdown-dtr_eq"), nullptr);
  ASSERT_NE(by_id(p, "slowdown-lru"), nullptr);
  ASSERT_NE(by_id(p, "slowdown-size"), nullptr);
  std::vector<Point> dtr_eq = points_of(*by_id(p, "slowdown-dtr_eq"));
  EXPECT_EQ(dtr_eq.size(), 7u);
  EXPECT_EQ(points_of(*by_id(p, "slowdown-lru")).size(), 7u);
  EXPECT_TRUE(points_of(*by_id(p, "slowdown-size")).empty());
  // Left to right by budget; slowdown rising as the budget falls (up is smaller y).
  for (size_t i = 1; i < dtr_eq.size(); ++i) {
    EXPECT_LT(dtr_eq[i - 1].x, dtr_eq[i].x);
    EXPECT_LT(dtr_eq[i - 1].y, dtr_eq[i].y);
  }
  // Infeasible points as markers of their own: out of memory 2 of dtr_eq, 4
  // of lru, 10 of size; dtr_eq's thrash.
  EXPECT_EQ(find_all(p, "path", "out-of-memory").size(), 16u);
  EXPECT_EQ(find_all(p, "polygon", "thrash").size(), 1u);
  EXPECT_EQ(find_all(p, "polygon", "smallest-feasible").size(), 2u);
  // Markers name their point on hover.
  bool tooltip = false;
  for (const Element* t : find_all(p, "title")) {
    tooltip |= t->text == "dtr_eq at 0.500 of the peak (50.00 MiB): slowdown 1.250x, 120 evictions, "
                          "300 replays, peak 49.00 MiB";
  }
  EXPECT_TRUE(tooltip);
  // The floor at 0.3 of the peak: 3/4 of the way to dtr_eq's 0.4 point.
  const Element* floor = by_id(p, "floor");
  ASSERT_NE(floor, nullptr);
  double frame_x = std::stod(find_all(p, "rect", "frame")[0]->attr("x"));
  EXPECT_NEAR(std::stod(floor->attr("x1")) - frame_x, 0.75 * (dtr_eq.front().x - frame_x), 0.02);
  // The escaped op name comes back as it was, in the peak's note.
  bool named = false;
  for (const Element* t : find_all(p, "text")) named |= t->text == "fancy<op>&'x\": 11.00 MiB (11 storages)";
  EXPECT_TRUE(named);
  // The timeline: both runs, the budget, evictions and replays.
  ASSERT_NE(by_id(p, "timeline-unbudgeted"), nullptr);
  ASSERT_NE(by_id(p, "timeline-budgeted"), nullptr);
  EXPECT_EQ(points_of(*by_id(p, "timeline-unbudgeted")).size(), 8u);
  EXPECT_EQ(points_of(*by_id(p, "timeline-budgeted")).size(), 10u);
  ASSERT_NE(by_id(p, "timeline-budget"), nullptr);
  std::string evictions = by_id(p, "timeline-evictions")->attr("d");
  EXPECT_EQ(std::count(evictions.begin(), evictions.end(), 'M'), 3);  // ops 1, 5, 9
  std::string replays = by_id(p, "timeline-replays")->attr("d");
  EXPECT_EQ(std::count(replays.begin(), replays.end(), 'M'), 2);  // ops 2, 7
  bool peak_noted = false;
  for (const Element* t : find_all(p, "text")) peak_noted |= t->text == "peak 100.00 MiB at tick 4";
  EXPECT_TRUE(peak_noted);
}

TEST(PlanReport, SvgOfDegenerateReports) {
  // Nothing at all.
  Parsed empty = parse_valid_svg(plan_svg(PlanReport{}));
  EXPECT_TRUE(find_all(empty, "polyline", "slowdown").empty());
  ASSERT_NE(by_id(empty, "timeline-unbudgeted"), nullptr);
  EXPECT_TRUE(points_of(*by_id(empty, "timeline-unbudgeted")).empty());
  EXPECT_EQ(by_id(empty, "floor"), nullptr);

  // A zero peak, budgets of fraction inf and nan, a non-finite slowdown, one sample.
  PlanReport zero;
  zero.points = {point(Heuristic::kDtr, 1.0, PlanOutcome::kFeasible, 1.0)};
  zero.points[0].fraction = std::numeric_limits<double>::infinity();
  zero.points.push_back(point(Heuristic::kDtr, 0.5, PlanOutcome::kFeasible,
                              std::numeric_limits<double>::infinity()));
  zero.points.push_back(point(Heuristic::kDtr, 0.5, PlanOutcome::kOutOfMemory));
  zero.points.back().fraction = std::nan("");
  zero.smallest_feasible = {point(Heuristic::kDtr, 0.5, PlanOutcome::kFeasible, std::nan(""))};
  zero.unbudgeted = timeline(-1, {0});
  zero.budgeted = timeline(0, {0});
  Parsed z = parse_valid_svg(plan_svg(zero));
  EXPECT_EQ(points_of(*by_id(z, "timeline-unbudgeted")).size(), 1u);
  EXPECT_EQ(format_plan(zero).find("nan"), std::string::npos);
  EXPECT_EQ(format_plan(zero).find("inf"), std::string::npos);

  // Every point infeasible.
  PlanReport none = full_report();
  for (PlanPoint& pt : none.points) pt.outcome = PlanOutcome::kOutOfMemory;
  for (PlanPoint& pt : none.smallest_feasible) pt.outcome = PlanOutcome::kOutOfMemory;
  Parsed n = parse_valid_svg(plan_svg(none));
  for (const Element* l : find_all(n, "polyline", "slowdown")) EXPECT_TRUE(points_of(*l).empty());
  EXPECT_TRUE(find_all(n, "polygon", "smallest-feasible").empty());
  EXPECT_EQ(find_all(n, "path", "out-of-memory").size(), none.points.size());
}

TEST(PlanReport, SvgStaysWellFormedForAnyBytesInNames) {
  PlanReport r = full_report();
  r.peak_by_op[0].op = "caf\xc3\xa9 \xff\xfe \xc0\xaf \xed\xa0\x80 \xef\xbf\xbe \xe2\x82";
  r.peak_by_op[2].op = "ctl\x01\x1f]]>";
  r.points[9].error = "oom\x80 <b>&amp;";  // dtr_eq at 0.2
  Parsed p = parse_valid_svg(plan_svg(r));
  std::vector<std::string> texts;
  for (const Element& e : p.elements) texts.push_back(e.text);
  auto has = [&](const std::string& t) { return std::find(texts.begin(), texts.end(), t) != texts.end(); };
  // Valid UTF-8 kept; each byte of a malformed sequence (stray, overlong,
  // surrogate, U+FFFE, truncated) replaced by U+FFFD.
  const std::string bad = "\xef\xbf\xbd";
  EXPECT_TRUE(has("caf\xc3\xa9 " + bad + bad + " " + bad + bad + " " + bad + bad + bad + " " + bad +
                  bad + bad + " " + bad + bad + ": 12.00 MiB (12 storages)"));
  EXPECT_TRUE(has("ctl  ]]>: 10.00 MiB (10 storages)"));
  EXPECT_TRUE(has("dtr_eq at 0.200 of the peak (20.00 MiB): out_of_memory: oom" + bad + " <b>&amp;"));
}

TEST(PlanReport, SvgDownsamplesALongTimelineKeepingThePeak) {
  constexpr int64_t kSamples = 100000;
  constexpr size_t kSpike = 61237;
  PlanReport r = full_report();
  r.unbudgeted = {};
  r.budgeted = {};
  r.budgeted.budget_bytes = 40 * kMiB;
  for (int64_t i = 0; i < kSamples; ++i) {
    int64_t saw = (i % 97) * kMiB / 4;  // 0 .. 24 MiB
    r.unbudgeted.tick.push_back(i + 1);
    r.unbudgeted.resident_bytes.push_back(size_t(i) == kSpike ? 99 * kMiB + 3 : saw);
    r.unbudgeted.evictions.push_back(0);
    r.unbudgeted.replays.push_back(0);
    r.budgeted.tick.push_back(i + 1);
    r.budgeted.resident_bytes.push_back(i == 777 ? 39 * kMiB : saw);
    r.budgeted.evictions.push_back(i % 10 == 0 ? 1 : 0);
    r.budgeted.replays.push_back(i % 7 == 0 ? 3 : 0);
  }
  std::string doc = plan_svg(r);
  EXPECT_LT(doc.size(), size_t{1} << 20);
  Parsed p = parse_valid_svg(doc);
  for (const char* id : {"timeline-unbudgeted", "timeline-budgeted"}) {
    SCOPED_TRACE(id);
    const Element* line = by_id(p, id);
    ASSERT_NE(line, nullptr);
    std::vector<Point> pts = points_of(*line);
    EXPECT_LE(pts.size(), 2000u);
    EXPECT_GE(pts.size(), 1000u);
    // The highest point drawn (smallest y) is the peak's marker, which is
    // placed from the full series: the single-sample spike survived.
    const Element* peak = by_id(p, std::string(id) == "timeline-unbudgeted" ? "timeline-peak"
                                                                            : "timeline-budgeted-peak");
    ASSERT_NE(peak, nullptr);
    auto top = std::min_element(pts.begin(), pts.end(), [](Point a, Point b) { return a.y < b.y; });
    EXPECT_DOUBLE_EQ(top->y, std::stod(peak->attr("cy")));
    EXPECT_DOUBLE_EQ(top->x, std::stod(peak->attr("cx")));
  }
  bool peak_noted = false;
  for (const Element* t : find_all(p, "text")) {
    peak_noted |= t->text == fmt::format("peak 99.00 MiB at tick {}", kSpike + 1);
  }
  EXPECT_TRUE(peak_noted);
  // At most one rug tick per pixel column.
  std::string d = by_id(p, "timeline-evictions")->attr("d");
  EXPECT_GT(std::count(d.begin(), d.end(), 'M'), 100);
  EXPECT_LE(std::count(d.begin(), d.end(), 'M'), 1000);
}

// ---- the SVG as a reader sees it -----------------------------------------------------

// The box a <text> covers, estimated for a sans-serif font: 0.64 em a
// character (DejaVu Sans' digits are 0.636 em wide), 0.8 em above the
// baseline, 0.25 em below; the size from font-size, else the root's 12.
struct TextBox {
  double x0, y0, x1, y1;
  std::string text;
};
std::vector<TextBox> text_boxes(const Parsed& p) {
  std::vector<TextBox> out;
  for (const Element* t : find_all(p, "text")) {
    if (!t->attr("transform").empty()) continue;  // the rotated axis title
    const double size = t->attr("font-size").empty() ? 12 : std::stod(t->attr("font-size"));
    size_t chars = 0;
    for (char c : t->text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    const double w = 0.64 * size * double(chars), x = std::stod(t->attr("x")), y = std::stod(t->attr("y"));
    const std::string anchor = t->attr("text-anchor");
    const double x0 = anchor == "end" ? x - w : anchor == "middle" ? x - w / 2 : x;
    out.push_back({x0, y - 0.8 * size, x0 + w, y + 0.25 * size, t->text});
  }
  return out;
}

// Fails for every two texts whose boxes overlap and every text that leaves the picture.
void expect_no_text_overlaps(const Parsed& p) {
  const std::vector<std::string> view = words(p.elements[0].attr("viewBox"));
  ASSERT_EQ(view.size(), 4u);
  const double width = std::stod(view[2]), height = std::stod(view[3]);
  const std::vector<TextBox> boxes = text_boxes(p);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const TextBox& a = boxes[i];
    EXPECT_TRUE(a.x0 >= 0 && a.x1 <= width && a.y0 >= 0 && a.y1 <= height) << "'" << a.text << "' leaves the picture";
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const TextBox& b = boxes[j];
      EXPECT_FALSE(a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1)
          << "'" << a.text << "' at (" << a.x0 << ", " << a.y1 << ") overlaps '" << b.text << "' at (" << b.x0
          << ", " << b.y1 << ")";
    }
  }
}

// Six heuristics whose curves run close together and whose smallest
// feasible budgets lie within a few pixels of each other (labels such as
// 10.30 and 12.98 MiB were once written over each other), by the floor.
PlanReport crowded_report() {
  PlanReport r = full_report();
  r.points.clear();
  r.smallest_feasible.clear();
  const Heuristic hs[] = {Heuristic::kDtrEq, Heuristic::kDtr, Heuristic::kDtrLocal,
                          Heuristic::kLru, Heuristic::kSize, Heuristic::kMsps};
  // (fraction, slowdown) of each smallest feasible budget; size and msps
  // share one grid point.
  const std::pair<double, double> best[] = {{0.1030, 2.0}, {0.1298, 2.05}, {0.12, 2.6},
                                            {0.125, 1.9},  {0.3, 1.35},    {0.3, 1.35}};
  for (size_t k = 0; k < std::size(hs); ++k) {
    for (int i = 0; i < 10; ++i) {
      const double f = 1.0 - 0.1 * i;
      r.points.push_back(point(hs[k], f, f >= 0.3 ? PlanOutcome::kFeasible : PlanOutcome::kOutOfMemory,
                               1 + (1 - f) * (0.5 + 0.05 * double(k))));
    }
    PlanPoint b = point(hs[k], best[k].first, PlanOutcome::kFeasible, best[k].second);
    b.budget_bytes = std::llround(best[k].first * 100 * double(kMiB));
    r.smallest_feasible.push_back(b);
  }
  r.floor_bytes = 10 * kMiB;
  return r;
}

TEST(PlanReport, SvgLabelsNeverOverlap) {
  for (const PlanReport& r : {full_report(), crowded_report()}) {
    SCOPED_TRACE(r.points.size());
    const Parsed p = parse_valid_svg(plan_svg(r));
    expect_no_text_overlaps(p);
    if (r.points.size() != 60) continue;
    // Every smallest feasible budget is named once; size and msps share one.
    std::map<std::string, int> named;
    for (const Element* t : find_all(p, "text", "smallest-feasible-label")) ++named[t->text];
    EXPECT_EQ(named, (std::map<std::string, int>{{"10.30 MiB", 1}, {"12.98 MiB", 1}, {"12.00 MiB", 1},
                                                 {"12.50 MiB", 1}, {"30.00 MiB", 1}}));
  }
  // Heuristics sharing one smallest feasible budget at one spot share its label.
  PlanReport same = full_report();
  for (PlanPoint& b : same.smallest_feasible) b = point(b.heuristic, 0.3, PlanOutcome::kFeasible, 1.35);
  const Parsed p = parse_valid_svg(plan_svg(same));
  expect_no_text_overlaps(p);
  size_t labels = 0;
  for (const Element* t : find_all(p, "text")) labels += t->text == "30.00 MiB";
  EXPECT_EQ(labels, 1u);
}

TEST(PlanReport, SvgDrawsTheFirstHeuristicOverTheOthers) {
  // The first heuristic of the report is the one choose_budget reads: its
  // curve and points come last (on top), heavier than the others'.
  for (Heuristic first : {Heuristic::kDtrEq, Heuristic::kLru}) {
    PlanReport r = crowded_report();
    std::stable_partition(r.points.begin(), r.points.end(), [&](const PlanPoint& q) { return q.heuristic == first; });
    const std::string name(heuristic_name(first));
    SCOPED_TRACE(name);
    const Parsed p = parse_valid_svg(plan_svg(r));
    const std::vector<const Element*> curves = find_all(p, "polyline", "slowdown");
    ASSERT_EQ(curves.size(), 6u);
    EXPECT_EQ(curves.back()->attr("id"), "slowdown-" + name);
    const double heavy = std::stod(curves.back()->attr("stroke-width"));
    for (size_t i = 0; i + 1 < curves.size(); ++i) EXPECT_LT(std::stod(curves[i]->attr("stroke-width")), heavy);
    const std::string own = curves.back()->attr("stroke");
    for (size_t i = 0; i + 1 < curves.size(); ++i) EXPECT_NE(curves[i]->attr("stroke"), own);
    // Its points are the last drawn.
    const size_t n = size_t(std::count_if(r.points.begin(), r.points.end(), [&](const PlanPoint& q) {
      return q.heuristic == first && q.feasible();
    }));
    const std::vector<const Element*> points = find_all(p, "circle", "point");
    ASSERT_GE(points.size(), n);
    ASSERT_GE(n, 7u);
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(points[i]->attr("fill") == own, i >= points.size() - n) << i;
    }
    // The legend says which curve it is.
    bool legend = false;
    for (const Element* t : find_all(p, "text")) legend |= t->text == name + " (auto)";
    EXPECT_TRUE(legend);
  }
}

// The texts of the class `cls`, in document order.
std::vector<std::string> texts_of(const Parsed& p, const std::string& cls) {
  std::vector<std::string> out;
  for (const Element* t : find_all(p, "text", cls)) out.push_back(t->text);
  return out;
}

TEST(PlanReport, SvgSaysWhyWhenNoCurveCanBeDrawn) {
  PlanReport none = full_report();
  for (PlanPoint& pt : none.points) pt.outcome = PlanOutcome::kOutOfMemory;
  for (PlanPoint& pt : none.smallest_feasible) pt.outcome = PlanOutcome::kOutOfMemory;
  Parsed p = parse_valid_svg(plan_svg(none));
  EXPECT_EQ(texts_of(p, "why-empty"),
            (std::vector<std::string>{"no budget simulated is feasible: each ran out of memory or thrashed",
                                      "the floor (bytes never evictable) is 30.00 MiB, 0.300 of the peak"}));
  expect_no_text_overlaps(p);

  // Feasible at the peak only: a curve of one point.
  PlanReport peak_only = full_report();
  for (PlanPoint& pt : peak_only.points) {
    if (pt.fraction < 0.99) pt.outcome = PlanOutcome::kOutOfMemory;
  }
  for (PlanPoint& pt : peak_only.smallest_feasible) pt = point(pt.heuristic, 1.0, PlanOutcome::kFeasible, 1.0);
  peak_only.floor_bytes = peak_only.peak_bytes;
  p = parse_valid_svg(plan_svg(peak_only));
  EXPECT_EQ(texts_of(p, "why-empty"),
            (std::vector<std::string>{"no budget below the recorded peak is feasible",
                                      "the floor (bytes never evictable) is 100.00 MiB, 1.000 of the peak"}));
  expect_no_text_overlaps(p);

  EXPECT_EQ(texts_of(parse_valid_svg(plan_svg(PlanReport{})), "why-empty"),
            std::vector<std::string>{"no budgets simulated"});
  EXPECT_TRUE(texts_of(parse_valid_svg(plan_svg(full_report())), "why-empty").empty());
}

TEST(PlanReport, SvgMarksTheMaxSlowdownAndTheBudgetChooseBudgetPicks) {
  const PlanReport r = full_report();
  // dtr_eq's curve, left to right: 0.4 (1.3x), 0.5 (1.25x), 0.6 (1.1x), ..., 1.0 (1x).
  for (const auto& [limit, at] : std::vector<std::pair<double, size_t>>{{1.25, 1}, {1.1, 2}, {1.0, 6}}) {
    SCOPED_TRACE(limit);
    const Parsed p = parse_valid_svg(limit == kDefaultMaxSlowdown ? plan_svg(r) : plan_svg(r, limit));
    const std::vector<Point> curve = points_of(*by_id(p, "slowdown-dtr_eq"));
    ASSERT_EQ(curve.size(), 7u);
    const Element* line = by_id(p, "max-slowdown");
    ASSERT_NE(line, nullptr);
    EXPECT_EQ(line->attr("y1"), line->attr("y2"));  // horizontal, through the point at the limit
    EXPECT_NEAR(std::stod(line->attr("y1")), curve[at].y, 0.01);
    const Element* label = by_id(p, "max-slowdown-label");
    ASSERT_NE(label, nullptr);
    EXPECT_EQ(label->text, fmt::format("max slowdown {}x", limit));

    const std::optional<int64_t> pick = choose_budget(r, limit);
    ASSERT_TRUE(pick.has_value());
    const Element* pick_line = by_id(p, "auto-pick");
    const Element* ring = by_id(p, "auto-pick-point");
    ASSERT_NE(pick_line, nullptr);
    ASSERT_NE(ring, nullptr);
    EXPECT_EQ(pick_line->attr("x1"), pick_line->attr("x2"));  // vertical, at the picked budget
    EXPECT_NEAR(std::stod(pick_line->attr("x1")), curve[at].x, 0.01);
    EXPECT_NEAR(std::stod(ring->attr("cx")), curve[at].x, 0.01);
    EXPECT_NEAR(std::stod(ring->attr("cy")), curve[at].y, 0.01);
    ASSERT_NE(by_id(p, "auto-pick-label"), nullptr);
    EXPECT_EQ(by_id(p, "auto-pick-label")->text, fmt::format("auto: {:.2f} MiB", double(*pick) / double(kMiB)));
    expect_no_text_overlaps(p);
  }

  // Nothing within the limit: the line, no pick, and the label says so.
  PlanReport slow = full_report();
  for (PlanPoint& pt : slow.points) pt.predicted_slowdown += 0.5;
  for (PlanPoint& pt : slow.smallest_feasible) pt.predicted_slowdown += 0.5;
  ASSERT_FALSE(choose_budget(slow, 1.25).has_value());
  const Parsed p = parse_valid_svg(plan_svg(slow));
  ASSERT_NE(by_id(p, "max-slowdown"), nullptr);
  EXPECT_EQ(by_id(p, "auto-pick"), nullptr);
  EXPECT_EQ(by_id(p, "auto-pick-point"), nullptr);
  EXPECT_EQ(by_id(p, "max-slowdown-label")->text, "max slowdown 1.25x: no budget within it");

  EXPECT_THROW(plan_svg(r, 0.5), ValueError);
  EXPECT_THROW(plan_svg(r, std::nan("")), ValueError);
}

// ---- write_plan_svg ---------------------------------------------------------------

TEST(PlanReport, WritePlanSvgWritesTheDocument) {
  fs::path path = fs::temp_directory_path() / fmt::format("dtr_plan_report_test_{}.svg", ::getpid());
  PlanReport r = full_report();
  write_plan_svg(r, path.string());
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), plan_svg(r));
  fs::remove(path);
}

TEST(PlanReport, WritePlanSvgToAnUnwritablePathThrowsNamingIt) {
  const std::string missing = "/nonexistent-dtr-dir/sub/plan.svg";
  EXPECT_THROW(write_plan_svg(full_report(), missing), ValueError);
  EXPECT_NE(testing::error_message<ValueError>([&] { write_plan_svg(full_report(), missing); })
                .find(missing),
            std::string::npos);
  // A folder is not writable as a file, for root too.
  std::string folder = fs::temp_directory_path().string();
  EXPECT_THROW(write_plan_svg(full_report(), folder), ValueError);
  // /dev/full accepts the open and fails the write.
  if (fs::exists("/dev/full")) {
    EXPECT_NE(testing::error_message<ValueError>([&] { write_plan_svg(full_report(), "/dev/full"); })
                  .find("/dev/full"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace dtr::remat

namespace dtr::remat {
namespace {

// The report of a real plan (not a hand-built one): the document parses,
// with a curve per heuristic and both timelines of the step's ops.
TEST(PlanReport, SvgOfARealPlan) {
  set_memory_budget(std::nullopt);
  const Tensor a = randn({64, 64});
  auto step = [&] {
    Tensor h = a;
    for (int i = 0; i < 6; ++i) h = gelu(matmul(h, a));
    (void)h.sum().item<float>();
  };
  PlanOptions o;
  o.warmup_steps = 1;
  o.heuristics = {Heuristic::kDtrEq, Heuristic::kLru};
  const PlanReport r = plan(step, o);
  const Parsed p = parse_valid_svg(plan_svg(r));
  EXPECT_EQ(find_all(p, "polyline", "slowdown").size(), 2u);
  ASSERT_NE(by_id(p, "timeline-unbudgeted"), nullptr);
  ASSERT_NE(by_id(p, "timeline-budgeted"), nullptr);
  EXPECT_EQ(points_of(*by_id(p, "timeline-unbudgeted")).size(), size_t(r.ops));
  EXPECT_NE(format_plan(r).find("lru"), std::string::npos);
}

}  // namespace
}  // namespace dtr::remat
