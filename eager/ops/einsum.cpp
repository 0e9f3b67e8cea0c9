// einsum (torch.einsum), a composition with no row of its own: every
// operand's repeated subscripts are reduced to their diagonal (a product
// with an identity mask and a sum), subscripts no other operand and not the
// output use are summed, operands are contracted pairwise left to right as
// one batched matmul each (permute to [batch, kept, contracted], reshape to
// 3-D, matmul, reshape back), and the result is summed and permuted into
// the output's order. Autograd differentiates through those ops.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/error.h"
#include "eager/ops.h"

namespace dtr {
namespace {

// Labels: 'A'..'Z', 'a'..'z' as their characters; ellipsis dims as
// kEllipsis + k, the last ellipsis dim of the widest operand being the last k.
constexpr int kEllipsis = 256;
using Labels = std::vector<int>;

struct Term {
  std::string letters;  // the subscripts as written, "..." kept
  bool ellipsis = false;
};

struct Equation {
  std::vector<Term> inputs;
  bool explicit_output = false;
  Term output;
};

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// One side's term: letters and at most one "...". ValueError otherwise.
Term parse_term(std::string_view eq, std::string_view t) {
  Term term;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '.') {
      DTR_CHECK(!term.ellipsis && t.substr(i, 3) == "...", ValueError,
                "einsum(): found '.' that is not part of a single ellipsis (\"...\") in equation \"{}\"", eq);
      term.ellipsis = true;
      term.letters += "...";
      i += 2;
      continue;
    }
    DTR_CHECK(is_letter(c), ValueError,
              "einsum(): invalid subscript '{}' in equation \"{}\": subscripts must be in [a-zA-Z]", c, eq);
    term.letters += c;
  }
  return term;
}

Equation parse(std::string_view eq) {
  std::string s;
  for (char c : eq)
    if (c != ' ') s += c;
  Equation e;
  const size_t arrow = s.find("->");
  const std::string lhs = s.substr(0, arrow);
  if (arrow != std::string::npos) {
    e.explicit_output = true;
    e.output = parse_term(eq, std::string_view(s).substr(arrow + 2));
  }
  DTR_CHECK(lhs.find('-') == std::string::npos && lhs.find('>') == std::string::npos &&
                (arrow == std::string::npos || s.find("->", arrow + 2) == std::string::npos),
            ValueError, "einsum(): malformed \"->\" in equation \"{}\"", eq);
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    e.inputs.push_back(parse_term(eq, std::string_view(lhs).substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return e;
}

/// The labels of `term` for an operand of `ndim` dims, its ellipsis covering
/// the last ndim - letters of the `width` ellipsis labels.
Labels labels_of(const Term& term, int64_t ndim, int64_t width) {
  Labels out;
  const int64_t letters = int64_t(term.letters.size()) - (term.ellipsis ? 3 : 0);
  for (size_t i = 0; i < term.letters.size(); ++i) {
    if (term.letters[i] == '.') {
      for (int64_t k = width - (ndim - letters); k < width; ++k) out.push_back(kEllipsis + int(k));
      i += 2;
    } else {
      out.push_back(term.letters[i]);
    }
  }
  return out;
}

std::string label_str(int l) {
  return l >= kEllipsis ? "..." + std::to_string(l - kEllipsis) : std::string(1, char(l));
}

/// An operand with its labels, one per dim.
struct Operand {
  Tensor t;
  Labels labels;
};

/// Sums the dims whose labels are not in `keep` (none: t unchanged).
Operand sum_unkept(Operand a, const std::vector<bool>& keep) {
  Shape dims;
  Labels rest;
  for (size_t d = 0; d < a.labels.size(); ++d) {
    if (keep[size_t(a.labels[d])]) {
      rest.push_back(a.labels[d]);
    } else {
      dims.push_back(int64_t(d));
    }
  }
  if (dims.empty()) return a;
  return {sum(a.t, dims), rest};
}

/// Replaces every pair of dims with one label by their diagonal ("ii->i").
Operand take_diagonals(std::string_view eq, Operand a) {
  for (size_t p = 0; p < a.labels.size(); ++p) {
    for (size_t q = p + 1; q < a.labels.size();) {
      if (a.labels[q] != a.labels[p]) {
        ++q;
        continue;
      }
      const int64_t n = a.t.shape()[p];
      DTR_CHECK(a.t.shape()[q] == n, ValueError,
                "einsum(): subscript {} is repeated for operand dims of sizes {} and {} in equation \"{}\"",
                label_str(a.labels[p]), n, a.t.shape()[q], eq);
      std::vector<double> eye(size_t(n * n), 0.0);
      for (int64_t i = 0; i < n; ++i) eye[size_t(i * n + i)] = 1.0;
      Shape mask_shape(a.labels.size(), 1);
      mask_shape[p] = mask_shape[q] = n;
      const Tensor mask = from_vector(eye, mask_shape, TensorOptions(a.t.dtype()).device(a.t.device()));
      a.t = sum(mul(a.t, mask), {int64_t(q)});
      a.labels.erase(a.labels.begin() + int64_t(q));
    }
  }
  return a;
}

/// The size of label l in a (1 when a lacks it).
int64_t size_of(const Operand& a, int l) {
  for (size_t d = 0; d < a.labels.size(); ++d)
    if (a.labels[d] == l) return a.t.shape()[d];
  return 1;
}

/// a with the dim of label l expanded to n (it has size 1).
Operand expand_label(Operand a, int l, int64_t n) {
  Shape shape = a.t.shape();
  for (size_t d = 0; d < a.labels.size(); ++d)
    if (a.labels[d] == l) shape[d] = n;
  a.t = expand(a.t, shape);
  return a;
}

/// The contraction of a and b over their shared labels not in `keep`, as one
/// batched matmul; labels: batch (shared, kept), a's own, b's own.
Operand contract(std::string_view eq, Operand a, Operand b, const std::vector<bool>& keep) {
  Labels batch, a_only, b_only, summed;
  for (int l : a.labels) {
    const bool shared = std::find(b.labels.begin(), b.labels.end(), l) != b.labels.end();
    if (!shared) {
      a_only.push_back(l);
      continue;
    }
    const int64_t na = size_of(a, l), nb = size_of(b, l);
    DTR_CHECK(na == nb || na == 1 || nb == 1, ValueError,
              "einsum(): operands do not broadcast: subscript {} has size {} for one operand and {} "
              "for another in equation \"{}\"",
              label_str(l), na, nb, eq);
    if (na != nb) {
      if (na == 1) a = expand_label(std::move(a), l, nb);
      else b = expand_label(std::move(b), l, na);
    }
    (keep[size_t(l)] ? batch : summed).push_back(l);
  }
  for (int l : b.labels)
    if (std::find(a.labels.begin(), a.labels.end(), l) == a.labels.end()) b_only.push_back(l);

  auto arrange = [](const Operand& o, std::initializer_list<const Labels*> groups) {
    Shape perm, shape;
    for (const Labels* g : groups) {
      int64_t n = 1;
      for (int l : *g) {
        const auto it = std::find(o.labels.begin(), o.labels.end(), l);
        const int64_t d = int64_t(it - o.labels.begin());
        perm.push_back(d);
        n *= o.t.shape()[size_t(d)];
      }
      shape.push_back(n);
    }
    return reshape(permute(o.t, perm), shape);
  };
  const Tensor out = matmul(arrange(a, {&batch, &a_only, &summed}), arrange(b, {&batch, &summed, &b_only}));
  Operand r;
  Shape shape;
  for (const Labels* g : {&batch, &a_only}) {
    for (int l : *g) {
      r.labels.push_back(l);
      shape.push_back(size_of(a, l));
    }
  }
  for (int l : b_only) {
    r.labels.push_back(l);
    shape.push_back(size_of(b, l));
  }
  r.t = reshape(out, shape);
  return r;
}

}  // namespace

/// torch.einsum (see eager/ops.h).
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  const Equation e = parse(equation);
  DTR_CHECK(!operands.empty(), ValueError, "einsum(): must provide at least one operand (equation \"{}\")",
            equation);
  DTR_CHECK(e.inputs.size() == operands.size(), ValueError,
            "einsum(): {} operands were provided but equation \"{}\" specifies {}", operands.size(),
            equation, e.inputs.size());
  // The ellipsis width: the most dims any operand's ellipsis covers.
  int64_t width = 0;
  for (size_t k = 0; k < operands.size(); ++k) {
    const Term& t = e.inputs[k];
    const int64_t letters = int64_t(t.letters.size()) - (t.ellipsis ? 3 : 0);
    const int64_t ndim = operands[k].dim();
    DTR_CHECK(t.ellipsis ? ndim >= letters : ndim == letters, ValueError,
              "einsum(): the number of subscripts in the equation ({}) does not match the number of "
              "dimensions ({}) for operand {}{} in equation \"{}\"",
              letters, ndim, k, t.ellipsis ? " (with an ellipsis: at most)" : "", equation);
    if (t.ellipsis) width = std::max(width, ndim - letters);
  }
  std::vector<Operand> ops;
  std::array<int, kEllipsis> count{};
  bool any_ellipsis = false;
  for (size_t k = 0; k < operands.size(); ++k) {
    ops.push_back({operands[k], labels_of(e.inputs[k], operands[k].dim(), width)});
    any_ellipsis = any_ellipsis || e.inputs[k].ellipsis;
    for (char c : e.inputs[k].letters)
      if (c != '.') ++count[size_t(c)];
  }
  Labels out;
  if (e.explicit_output) {
    out = labels_of(e.output, width + int64_t(e.output.letters.size()) - (e.output.ellipsis ? 3 : 0), width);
    for (size_t i = 0; i < out.size(); ++i) {
      DTR_CHECK(out[i] >= kEllipsis || count[size_t(out[i])] > 0, ValueError,
                "einsum(): output subscript {} does not appear in the equation for any input operand "
                "(equation \"{}\")",
                label_str(out[i]), equation);
      DTR_CHECK(std::find(out.begin(), out.begin() + int64_t(i), out[i]) == out.begin() + int64_t(i),
                ValueError, "einsum(): output subscript {} appears more than once in equation \"{}\"",
                label_str(out[i]), equation);
    }
  } else {
    if (any_ellipsis)
      for (int64_t k = 0; k < width; ++k) out.push_back(kEllipsis + int(k));
    for (int c = 0; c < kEllipsis; ++c)
      if (count[size_t(c)] == 1) out.push_back(c);
  }

  // keep[l]: l is in the output or in an operand not yet contracted.
  std::vector<bool> in_output(size_t(kEllipsis + width), false);
  for (int l : out) in_output[size_t(l)] = true;
  auto keep_after = [&](size_t k) {
    std::vector<bool> keep = in_output;
    for (size_t j = k + 1; j < ops.size(); ++j)
      for (int l : ops[j].labels) keep[size_t(l)] = true;
    return keep;
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    ops[k] = take_diagonals(equation, std::move(ops[k]));
    // Labels of this operand alone (not the output's, no other operand's) are summed now.
    std::vector<bool> keep = in_output;
    for (size_t j = 0; j < ops.size(); ++j)
      if (j != k)
        for (int l : ops[j].labels) keep[size_t(l)] = true;
    ops[k] = sum_unkept(std::move(ops[k]), keep);
  }
  Operand r = std::move(ops[0]);
  for (size_t k = 1; k < ops.size(); ++k) r = contract(equation, std::move(r), std::move(ops[k]), keep_after(k));
  r = sum_unkept(std::move(r), in_output);
  // Output labels absent from the result (size-1 broadcast only) cannot occur:
  // every output label is in some operand and was kept.
  Shape perm;
  for (int l : out) {
    const auto it = std::find(r.labels.begin(), r.labels.end(), l);
    DTR_CHECK(it != r.labels.end(), ValueError,
              "einsum(): output subscript {} has no dimension in equation \"{}\"", label_str(l), equation);
    perm.push_back(int64_t(it - r.labels.begin()));
  }
  return permute(r.t, perm);
}

}  // namespace dtr
