// Tensor indexing (eager/indexing.h): basic indices as views, advanced
// indices as index_select / where over the registry's rows.
#include "eager/indexing.h"

#include <numeric>

#include "core/error.h"
#include "core/shape_io.h"
#include "eager/ops.h"

namespace dtr::indexing {

TensorIndex::TensorIndex(const char* s) : kind_(Kind::kEllipsis) {
  DTR_CHECK(s != nullptr && std::string_view(s) == "...", ValueError,
            "TensorIndex: the only string index is \"...\" (Ellipsis), got \"{}\"",
            s == nullptr ? "" : s);
}

namespace {

/// One advanced index after parsing: int64 positions into dim `dim` of the
/// basic view.
struct Advanced {
  int64_t dim;
  Tensor index;
};

/// x after the basic indices, and the advanced ones still to apply.
struct Parsed {
  Tensor view;
  std::vector<Advanced> advanced;
};

/// The int64 positions of the true elements of `mask`, one vector per dim
/// (torch.nonzero(mask, as_tuple=True)), read on the host.
std::vector<std::vector<int64_t>> true_positions(const Tensor& mask) {
  const std::vector<bool> m = mask.to_vector<bool>();
  const Shape& s = mask.shape();
  std::vector<std::vector<int64_t>> out(s.size());
  std::vector<int64_t> at(s.size(), 0);
  for (bool v : m) {
    if (v) {
      for (size_t d = 0; d < s.size(); ++d) out[d].push_back(at[d]);
    }
    for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d) {
      if (++at[size_t(d)] < s[size_t(d)]) break;
      at[size_t(d)] = 0;
    }
  }
  return out;
}

Parsed parse(const Tensor& x, const std::vector<TensorIndex>& indices) {
  DTR_CHECK(x.defined(), ValueError, "index: the tensor is undefined");
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    if (i.is_ellipsis()) ++ellipses;
    else if (i.is_integer() || i.is_slice()) ++consumed;
    else if (i.is_tensor()) {
      const Tensor& t = i.tensor();
      DTR_CHECK(t.defined(), ValueError, "index: an index tensor is undefined");
      consumed += t.dtype() == kBool || t.dtype() == kUInt8 ? t.dim() : 1;
    }
  }
  DTR_CHECK(ellipses <= 1, IndexError, "an index can only have a single ellipsis ('...')");
  DTR_CHECK(consumed <= x.dim(), IndexError, "too many indices for tensor of dimension {}",
            x.dim());
  Parsed p{x, {}};
  Tensor& out = p.view;
  int64_t dim = 0;
  for (const TensorIndex& i : indices) {
    switch (i.kind()) {
      case TensorIndex::Kind::kInt: {
        const int64_t n = out.size(dim);
        DTR_CHECK(i.integer() >= -n && i.integer() < n, IndexError,
                  "index {} is out of bounds for dimension {} with size {}", i.integer(), dim, n);
        out = out.select(dim, i.integer());
        break;
      }
      case TensorIndex::Kind::kSlice: {
        const Slice& s = i.slice();
        const int64_t step = s.step.value_or(1);
        DTR_CHECK(step > 0, ValueError, "step must be greater than zero, got {}", step);
        out = out.slice(dim, s.start, s.stop, step);
        ++dim;
        break;
      }
      case TensorIndex::Kind::kNone:
        out = out.unsqueeze(dim);
        ++dim;
        break;
      case TensorIndex::Kind::kBool:
        // x[True] adds a dim of size 1, x[False] one of size 0 (a 0-d mask).
        out = out.unsqueeze(dim);
        if (!i.boolean()) out = out.slice(dim, 0, 0);
        ++dim;
        break;
      case TensorIndex::Kind::kEllipsis:
        dim += x.dim() - consumed;
        break;
      case TensorIndex::Kind::kTensor: {
        const Tensor& t = i.tensor();
        if (t.dtype() == kBool || t.dtype() == kUInt8) {
          if (t.dim() == 0) {  // as a Python bool, but advanced
            out = out.unsqueeze(dim);
            std::vector<int64_t> pos;
            if (t.item<bool>()) pos.push_back(0);
            p.advanced.push_back({dim, from_vector(pos, {}, kInt64)});
            ++dim;
            break;
          }
          for (int64_t d = 0; d < t.dim(); ++d) {
            DTR_CHECK(t.size(d) == out.size(dim + d), IndexError,
                      "The shape of the mask {} at index {} does not match the shape of the "
                      "indexed tensor {} at index {}",
                      shape_str(t.shape()), d, shape_str(out.shape()), dim + d);
          }
          const std::vector<std::vector<int64_t>> pos = true_positions(t);
          for (int64_t d = 0; d < t.dim(); ++d) {
            p.advanced.push_back({dim + d, from_vector(pos[size_t(d)], {}, kInt64)});
          }
          dim += t.dim();
        } else {
          DTR_CHECK(is_integral(t.dtype()), IndexError,
                    "tensors used as indices must be long, int, byte or bool tensors, got {}",
                    dtype_name(t.dtype()));
          p.advanced.push_back({dim, t});
          ++dim;
        }
        break;
      }
    }
  }
  return p;
}

/// How the advanced indices apply to the basic view: dims `first` ..
/// first + k - 1 of `source` (the view, permuted so they are adjacent) are
/// merged into one of `merged_size` positions, and `linear` (the broadcast
/// indices, bounds-checked, as positions into the merged dim, row-major over
/// `broadcast`) selects from it.
struct Plan {
  Tensor source;
  std::vector<int64_t> perm;  // empty: the view itself
  int64_t first = 0;
  int64_t k = 0;
  int64_t merged_size = 1;
  Shape broadcast;
  std::vector<int64_t> linear;
  /// source's shape with the k dims merged into one (`with` at `first`).
  Shape merged_shape(int64_t with) const {
    const Shape& s = source.shape();
    Shape out(s.begin(), s.begin() + first);
    out.push_back(with);
    out.insert(out.end(), s.begin() + first + k, s.end());
    return out;
  }
  /// source's shape with the k dims replaced by `broadcast`: x[indices]'s shape.
  Shape result_shape() const {
    const Shape& s = source.shape();
    Shape out(s.begin(), s.begin() + first);
    out.insert(out.end(), broadcast.begin(), broadcast.end());
    out.insert(out.end(), s.begin() + first + k, s.end());
    return out;
  }
};

Plan plan(const Parsed& p) {
  Plan out;
  const Tensor& v = p.view;
  out.k = int64_t(p.advanced.size());
  bool adjacent = true;
  for (size_t j = 1; j < p.advanced.size(); ++j) {
    adjacent = adjacent && p.advanced[j].dim == p.advanced[j - 1].dim + 1;
  }
  if (adjacent) {
    out.source = v;
    out.first = p.advanced[0].dim;
  } else {
    // PyTorch's rule: separated advanced indices put their dims first.
    for (const Advanced& a : p.advanced) out.perm.push_back(a.dim);
    for (int64_t d = 0; d < v.dim(); ++d) {
      bool adv = false;
      for (const Advanced& a : p.advanced) adv = adv || a.dim == d;
      if (!adv) out.perm.push_back(d);
    }
    out.source = v.permute(out.perm);
    out.first = 0;
  }
  // The indices broadcast together (IndexError naming their shapes otherwise).
  std::vector<Shape> shapes;
  for (const Advanced& a : p.advanced) shapes.push_back(a.index.shape());
  try {
    out.broadcast = shapes[0];
    for (size_t j = 1; j < shapes.size(); ++j) out.broadcast = broadcast_shapes(out.broadcast, shapes[j], "index");
  } catch (const ValueError&) {
    std::string all;
    for (const Shape& s : shapes) all += (all.empty() ? "" : ", ") + shape_str(s);
    throw IndexError(fmt::format("shape mismatch: indexing tensors could not be broadcast together "
                                 "with shapes {}",
                                 all));
  }
  const int64_t n = std::accumulate(out.broadcast.begin(), out.broadcast.end(), int64_t(1),
                                    std::multiplies<>());
  out.linear.assign(size_t(n), 0);
  for (const Advanced& a : p.advanced) out.merged_size *= v.size(a.dim);
  int64_t stride = out.merged_size;
  for (const Advanced& a : p.advanced) {
    const int64_t size = v.size(a.dim);
    stride /= size;
    const std::vector<int64_t> ix = a.index.expand(out.broadcast).to_vector<int64_t>();
    for (size_t e = 0; e < ix.size(); ++e) {
      int64_t i = ix[e];
      DTR_CHECK(i >= -size && i < size, IndexError,
                "index {} is out of bounds for dimension {} with size {}", i, a.dim, size);
      if (i < 0) i += size;
      out.linear[e] += i * stride;
    }
  }
  return out;
}

Tensor linear_index(const std::vector<int64_t>& v, Device device) {
  return from_vector(v, {}, TensorOptions(kInt64).device(device));
}

}  // namespace

Tensor get(const Tensor& x, const std::vector<TensorIndex>& indices) {
  Parsed p = parse(x, indices);
  if (p.advanced.empty()) return p.view;
  const Plan pl = plan(p);
  const Tensor merged = pl.source.reshape(pl.merged_shape(pl.merged_size));
  const Tensor picked = index_select(merged, pl.first, linear_index(pl.linear, x.device()));
  return picked.reshape(pl.result_shape());
}

namespace {
/// `v` without its leading size-1 dims: PyTorch drops them from an assigned
/// value before broadcasting it (numpy's rule), so `t[0] = ones(1, 3)` writes
/// a row of `t` (3) although (1, 3) does not broadcast to (3). A view.
Tensor without_leading_ones(const Tensor& v) {
  int64_t k = 0;
  while (k < v.dim() && v.size(k) == 1) ++k;
  if (k == 0) return v;
  return v.reshape(Shape(v.shape().begin() + k, v.shape().end()));
}
}  // namespace

void put(Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& assigned) {
  DTR_CHECK(assigned.defined(), ValueError, "index_put_: the value is undefined");
  const Tensor value = without_leading_ones(assigned);
  // x[mask] = v with v broadcasting against the unmasked dims: one where,
  // no host read of the mask.
  if (indices.size() == 1 && indices[0].is_tensor() && indices[0].tensor().dim() > 0 &&
      indices[0].tensor().dtype() == kBool && indices[0].tensor().dim() <= x.dim()) {
    const Tensor& mask = indices[0].tensor();
    const int64_t rest = x.dim() - mask.dim();
    bool matches = value.dim() <= rest;
    for (int64_t d = 0; d < mask.dim(); ++d) matches = matches && mask.size(d) == x.size(d);
    if (matches) {
      Shape ms = mask.shape();
      ms.insert(ms.end(), size_t(rest), 1);
      x.copy_(where(mask.reshape(ms), value.to(x.dtype()), x));
      return;
    }
  }
  Parsed p = parse(x, indices);
  Tensor& view = p.view;  // shares x's storage
  if (p.advanced.empty()) {
    view.copy_(value);
    return;
  }
  const Plan pl = plan(p);
  if (pl.linear.empty()) return;
  const Shape result = pl.result_shape();
  Tensor v;
  try {
    v = value.to(x.dtype()).expand(result);
  } catch (const ValueError&) {
    throw ValueError(fmt::format("index_put_: shape mismatch: value tensor of shape {} cannot be "
                                 "broadcast to indexing result of shape {}",
                                 shape_str(value.shape()), shape_str(result)));
  }
  const int64_t n = int64_t(pl.linear.size());
  v = v.reshape(pl.merged_shape(n));
  // For each merged position, the row of v written there (the last one on
  // duplicates) and whether any is.
  std::vector<int64_t> row(size_t(pl.merged_size), 0);
  std::vector<bool> written(size_t(pl.merged_size), false);
  for (int64_t e = 0; e < n; ++e) {
    row[size_t(pl.linear[size_t(e)])] = e;
    written[size_t(pl.linear[size_t(e)])] = true;
  }
  const Tensor spread = index_select(v, pl.first, linear_index(row, x.device()));
  Shape mask_shape(size_t(pl.source.dim() - pl.k + 1), 1);
  mask_shape[size_t(pl.first)] = pl.merged_size;
  const Tensor mask = from_vector(written, mask_shape, TensorOptions(kBool).device(x.device()));
  const Tensor current = pl.source.reshape(pl.merged_shape(pl.merged_size));
  Tensor updated = where(mask, spread, current).reshape(pl.source.shape());
  if (!pl.perm.empty()) {
    std::vector<int64_t> inverse(pl.perm.size());
    for (size_t d = 0; d < pl.perm.size(); ++d) inverse[size_t(pl.perm[d])] = int64_t(d);
    updated = updated.permute(inverse);
  }
  view.copy_(updated);
}

void put(Tensor& x, const std::vector<TensorIndex>& indices, Scalar value) {
  DTR_CHECK(x.defined(), ValueError, "index_put_: the tensor is undefined");
  // x[mask] = s: masked_fill_ in place, no host read of the mask.
  if (indices.size() == 1 && indices[0].is_tensor() && indices[0].tensor().dtype() == kBool &&
      indices[0].tensor().dim() > 0 && indices[0].tensor().dim() <= x.dim()) {
    const Tensor& mask = indices[0].tensor();
    bool matches = true;
    for (int64_t d = 0; d < mask.dim(); ++d) matches = matches && mask.size(d) == x.size(d);
    if (matches) {
      Shape ms = mask.shape();
      ms.insert(ms.end(), size_t(x.dim() - mask.dim()), 1);
      x.masked_fill_(mask.reshape(ms), value);
      return;
    }
  }
  put(x, indices, full({}, value, TensorOptions(x.dtype()).device(x.device())));
}

}  // namespace dtr::indexing

namespace dtr {

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const {
  return indexing::get(*this, std::vector<indexing::TensorIndex>(indices));
}
Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const {
  return indexing::get(*this, indices);
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value) {
  indexing::put(*this, std::vector<indexing::TensorIndex>(indices), value);
  return *this;
}
Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, Scalar value) {
  indexing::put(*this, std::vector<indexing::TensorIndex>(indices), value);
  return *this;
}
Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value) {
  indexing::put(*this, indices, value);
  return *this;
}
Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value) {
  indexing::put(*this, indices, value);
  return *this;
}

}  // namespace dtr
