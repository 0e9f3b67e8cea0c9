// float32 conv2d and its two gradients through oneDNN; Note [oneDNN
// convolutions] in cpu/conv.cpp says how they stay deterministic.
//
// Each call cuts the batch into chunks of onednn_images_per_chunk images (a
// function of the shapes alone) and runs one single-threaded oneDNN
// primitive per chunk on dtr's pool. Operands stay where they are (NCHW /
// OIHW tensors); a primitive that prefers a blocked layout gets its
// operands through reorders into per-thread buffers. Primitives are cached
// per process by their shapes.
#include "cpu/onednn_conv.h"

#include <algorithm>
#include <atomic>

#include "core/parallel.h"

#if DTR_HAVE_ONEDNN

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cpu/onednn_support.h"

namespace dtr::cpu {
namespace {

using dnnl::memory;
using onednn::Buffer;
using onednn::cpu_engine;
using onednn::omp_control;
using onednn::OneOmpThread;
using onednn::thread_scratch;
using onednn::ThreadScratch;
using Tag = memory::format_tag;
using Dims = memory::dims;

std::atomic<bool> g_enabled{true};

// ---- primitives -------------------------------------------------------------------
enum class Dir : int64_t { kForward, kInputGrad, kWeightGrad };

// One operand of a primitive: its layout in the tensor (`user`: NCHW of a
// chunk, or OIHW / GOIHW of the weight) and the primitive's; a reorder
// between them when they differ.
struct Operand {
  memory::desc user, conv;
  std::optional<dnnl::reorder> reorder;  // user -> conv for inputs, conv -> user for outputs
  bool direct() const { return !reorder.has_value(); }
};

struct Primitive {
  bool ok = false;  // oneDNN made it; else the call falls back to im2col
  dnnl::primitive conv;
  Operand a, b, out;  // forward: src, weights, dst; input grad: diff_dst, weights, diff_src;
                      // weight grad: diff_dst, src, diff_weights
  size_t scratchpad_bytes = 0;
};

Dims dims4(int64_t a, int64_t b, int64_t c, int64_t d) { return Dims{a, b, c, d}; }

memory::desc weight_desc(const ConvGeometry& g, Tag tag_plain_or_any) {
  if (g.groups == 1) return memory::desc(dims4(g.Cout, g.Cg, g.kH, g.kW), memory::data_type::f32,
                                         tag_plain_or_any == Tag::any ? Tag::any : Tag::oihw);
  return memory::desc(Dims{g.groups, g.Og(), g.Cg, g.kH, g.kW}, memory::data_type::f32,
                      tag_plain_or_any == Tag::any ? Tag::any : Tag::goihw);
}

// Whether the primitive of `dir` takes blocked layouts (format_tag::any,
// oneDNN's choice, with reorders of each chunk) or works on the tensors'
// NCHW in place (oneDNN's im2col + GEMM). A function of the shapes alone,
// so the choice (and with it the rounding) never varies within a run.
// Measured single-threaded on AVX-512 (a whole zoo batch, reorders
// included): the blocked direct kernels are 2-10x faster for 3x3 layers,
// also with 3 or 8 output channels; a 1x1 stride-1 convolution is a plain
// GEMM on NCHW and wins as it lies (16->4 channels at 64x64: 0.1 ms against
// 4 ms); the blocked input gradient of a layer with fewer than 8 input
// channels (a stem, a decoder's 3-channel output) is 2-8x slower than the
// plain one, unless depthwise (jit_dw, 10x faster than plain).
bool blocked_layout(Dir dir, const ConvGeometry& g) {
  if (g.kH == 1 && g.kW == 1 && g.sH == 1 && g.sW == 1 && g.pH == 0 && g.pW == 0) return false;
  const bool depthwise = g.groups > 1 && g.Cg == 1 && g.Og() == 1;
  if (dir == Dir::kInputGrad && g.Cg < 8 && !depthwise) return false;
  return true;
}

Primitive make_primitive(Dir dir, const ConvGeometry& g, int64_t n, bool bias) {
  const OneOmpThread one;
  dnnl::engine& engine = cpu_engine();
  const bool blocked = blocked_layout(dir, g);
  const Tag act = blocked ? Tag::any : Tag::nchw;
  const auto f32 = memory::data_type::f32;
  const memory::desc x_user(dims4(n, g.C, g.H, g.W), f32, Tag::nchw);
  const memory::desc y_user(dims4(n, g.Cout, g.Ho, g.Wo), f32, Tag::nchw);
  const memory::desc w_user = weight_desc(g, Tag::oihw);
  const memory::desc x_md(dims4(n, g.C, g.H, g.W), f32, act);
  const memory::desc y_md(dims4(n, g.Cout, g.Ho, g.Wo), f32, act);
  const memory::desc w_md = weight_desc(g, act);
  const memory::desc b_md(Dims{g.Cout}, f32, Tag::x);
  const Dims strides{g.sH, g.sW}, dilation{g.dH - 1, g.dW - 1}, pad{g.pH, g.pW};
  // Symmetric padding, as PyTorch's: oneDNN's output size is then PyTorch's
  // floor((H + 2p - d (k - 1) - 1) / s) + 1, also for an input gradient
  // whose input has rows past the last window (conv_transpose2d's
  // output_padding); those rows get zero.
  const Dims pad_r = pad;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  Primitive p;
  size_t reorder_scratchpad = 0;
  auto operand = [&](const memory::desc& user, const memory::desc& conv, bool is_input) {
    Operand o{user, conv, std::nullopt};
    if (!(user == conv)) {
      const auto pd = is_input ? dnnl::reorder::primitive_desc(engine, user, engine, conv, attr)
                               : dnnl::reorder::primitive_desc(engine, conv, engine, user, attr);
      reorder_scratchpad = std::max(reorder_scratchpad, pd.scratchpad_desc().get_size());
      o.reorder = dnnl::reorder(pd);
    }
    return o;
  };
  auto input = [&](const memory::desc& user, const memory::desc& conv) { return operand(user, conv, true); };
  auto output = [&](const memory::desc& user, const memory::desc& conv) { return operand(user, conv, false); };
  try {
    const auto fwd_desc = bias && dir == Dir::kForward
                              ? dnnl::convolution_forward::desc(
                                    dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                    x_md, w_md, b_md, y_md, strides, dilation, pad, pad_r)
                              : dnnl::convolution_forward::desc(
                                    dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                    x_md, w_md, y_md, strides, dilation, pad, pad_r);
    const dnnl::convolution_forward::primitive_desc fwd(fwd_desc, attr, engine);
    switch (dir) {
      case Dir::kForward:
        p.conv = dnnl::convolution_forward(fwd);
        p.a = input(x_user, fwd.src_desc());
        p.b = input(w_user, fwd.weights_desc());
        p.out = output(y_user, fwd.dst_desc());
        p.scratchpad_bytes = fwd.scratchpad_desc().get_size();
        break;
      case Dir::kInputGrad: {
        const dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x_md, w_md,
                                                  y_md, strides, dilation, pad, pad_r),
            attr, engine, fwd);
        p.conv = dnnl::convolution_backward_data(pd);
        p.a = input(y_user, pd.diff_dst_desc());
        p.b = input(w_user, pd.weights_desc());
        p.out = output(x_user, pd.diff_src_desc());
        p.scratchpad_bytes = pd.scratchpad_desc().get_size();
        break;
      }
      case Dir::kWeightGrad: {
        const dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_md, w_md,
                                                     y_md, strides, dilation, pad, pad_r),
            attr, engine, fwd);
        p.conv = dnnl::convolution_backward_weights(pd);
        p.a = input(y_user, pd.diff_dst_desc());
        p.b = input(x_user, pd.src_desc());
        p.out = output(w_user, pd.diff_weights_desc());
        p.scratchpad_bytes = pd.scratchpad_desc().get_size();
        break;
      }
    }
    p.scratchpad_bytes = std::max(p.scratchpad_bytes, reorder_scratchpad);
    p.ok = true;
  } catch (const dnnl::error&) {
    p.ok = false;  // im2col runs it
  }
  return p;
}

// The cache of primitives, keyed by direction, chunk size and geometry. Made
// once per shape (oneDNN's JIT takes milliseconds); at most kCacheEntries,
// after which it starts afresh (a program cycling through more shapes than
// that pays the creation again, nothing else).
using Key = std::array<int64_t, 19>;
constexpr size_t kCacheEntries = 512;

std::shared_ptr<const Primitive> primitive(Dir dir, const ConvGeometry& g, int64_t n, bool bias) {
  static std::mutex mu;
  static auto& cache = *new std::map<Key, std::shared_ptr<const Primitive>>();  // never destroyed, as the engine
  const Key key{int64_t(dir), n,    g.C,  g.H,  g.W,  g.Cout, g.Cg, g.kH, g.kW, g.Ho,
                g.Wo,         g.sH, g.sW, g.pH, g.pW, g.dH,   g.dW, g.groups, bias ? 1 : 0};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto made = std::make_shared<const Primitive>(make_primitive(dir, g, n, bias));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kCacheEntries) cache.clear();
  return cache.emplace(key, std::move(made)).first->second;
}

// The chunks of a call: `count` chunks of `size` images, the last one `tail`.
struct Chunks {
  int64_t size, count, tail;
};
Chunks chunks_of(const ConvGeometry& g) {
  const int64_t size = onednn_images_per_chunk(g);
  const int64_t count = (g.N + size - 1) / size;
  return {size, count, g.N - (count - 1) * size};
}

// The full chunk's primitive and the tail chunk's (the same when they match);
// null when oneDNN rejects either.
struct ChunkPrimitives {
  std::shared_ptr<const Primitive> full, tail;
  const Primitive& of(int64_t images, const Chunks& c) const { return images == c.size ? *full : *tail; }
};
std::optional<ChunkPrimitives> chunk_primitives(Dir dir, const ConvGeometry& g, const Chunks& c, bool bias) {
  ChunkPrimitives p;
  p.full = primitive(dir, g, c.size, bias);
  p.tail = c.tail == c.size ? p.full : primitive(dir, g, c.tail, bias);
  if (!p.full->ok || !p.tail->ok) return std::nullopt;
  return p;
}

bool usable(const ConvGeometry& g) {
  return g_enabled.load(std::memory_order_relaxed) && omp_control().usable && g.N > 0 && g.C > 0 &&
         g.Cout > 0 && g.H > 0 && g.W > 0 && g.Ho > 0 && g.Wo > 0;
}

// Runs `reorder` from src to dst on this thread's stream.
void run_reorder(const dnnl::reorder& r, dnnl::memory& src, dnnl::memory& dst, dnnl::memory& pad,
                 dnnl::stream& s) {
  r.execute(s, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}, {DNNL_ARG_SCRATCHPAD, pad}});
}

memory scratchpad(const Primitive& p, ThreadScratch& ts) {
  if (p.scratchpad_bytes == 0) return memory(memory::desc(), cpu_engine(), nullptr);
  return memory(memory::desc(Dims{int64_t(p.scratchpad_bytes)}, memory::data_type::u8, Tag::x), cpu_engine(),
                ts.pad.get(p.scratchpad_bytes));
}

// The weight in the layout of both chunk primitives' `b` operand (the
// forward's and the input gradient's weights), reordered once per call into
// `buffer` when the primitive wants another layout.
memory weight_memory(const ChunkPrimitives& p, const float* w, Buffer& buffer) {
  dnnl::engine& engine = cpu_engine();
  const Operand& op = p.full->b;
  memory user(op.user, engine, const_cast<float*>(w));
  if (op.direct()) return user;
  const OneOmpThread one;
  memory conv(op.conv, engine, buffer.get(op.conv.get_size()));
  ThreadScratch& ts = thread_scratch();
  memory pad = scratchpad(*p.full, ts);
  run_reorder(*op.reorder, user, conv, pad, ts.stream);
  ts.stream.wait();
  return conv;
}

bool same_layout(const Operand& x, const Operand& y) { return x.conv == y.conv; }

// A chunk's activation input: the tensor's memory, or a reorder of it into `buffer`.
memory chunk_input(const Operand& op, float* data, Buffer& buffer, memory& pad, dnnl::stream& s) {
  dnnl::engine& engine = cpu_engine();
  memory user(op.user, engine, data);
  if (op.direct()) return user;
  memory conv(op.conv, engine, buffer.get(op.conv.get_size()));
  run_reorder(*op.reorder, user, conv, pad, s);
  return conv;
}

// Calls f(chunk index, first image, images) for every chunk on dtr's pool,
// one chunk per task, each under one OpenMP thread.
template <typename F>
void for_chunks(const Chunks& c, F&& f) {
  parallel_for(c.count, 1, [&](int64_t b, int64_t e) {
    const OneOmpThread one;
    for (int64_t i = b; i < e; ++i) f(i, i * c.size, i + 1 == c.count ? c.tail : c.size);
  });
}

}  // namespace

int64_t onednn_images_per_chunk(const ConvGeometry& g) {
  // Chunks halve while a chunk keeps at least kChunkMacs multiply-adds, and
  // further while a chunk's activations exceed kChunkElements, up to
  // kMaxChunks: enough chunks to share among threads, each a sizeable call,
  // per-thread buffers bounded (by kChunkElements, or 1/64 of the batch).
  constexpr int64_t kChunkMacs = int64_t{1} << 23;
  constexpr int64_t kChunkElements = int64_t{1} << 22;
  constexpr int64_t kMaxChunks = 64;
  const int64_t N = std::max<int64_t>(g.N, 1);
  const int64_t macs = std::max<int64_t>(g.Cout * g.kk() * g.P(), 1);
  const int64_t elements = std::max<int64_t>(g.C * g.H * g.W + g.Cout * g.P(), 1);
  auto size_of = [&](int64_t count) { return (N + count - 1) / count; };
  int64_t count = 1;
  while (count < N && count * 2 <= kMaxChunks) {
    const bool too_big = size_of(count) * elements > kChunkElements;
    const bool worth = size_of(count * 2) * macs >= kChunkMacs;
    if (!too_big && !worth) break;
    count *= 2;
  }
  return size_of(count);
}

bool onednn_conv_available() { return omp_control().usable; }
void set_onednn_conv_enabled(bool enabled) { g_enabled.store(enabled); }
bool onednn_conv_enabled() { return g_enabled.load() && onednn_conv_available(); }

bool onednn_conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  if (!usable(g)) return false;
  const Chunks c = chunks_of(g);
  const auto prims = chunk_primitives(Dir::kForward, g, c, bias != nullptr);
  if (!prims || !same_layout(prims->full->b, prims->tail->b)) return false;
  Buffer weights;
  memory wm = weight_memory(*prims, w, weights);
  dnnl::engine& engine = cpu_engine();
  memory bm = bias != nullptr ? memory(memory::desc(Dims{g.Cout}, memory::data_type::f32, Tag::x), engine,
                                       const_cast<float*>(bias))
                              : memory();
  for_chunks(c, [&](int64_t, int64_t n0, int64_t images) {
    const Primitive& p = prims->of(images, c);
    ThreadScratch& ts = thread_scratch();
    memory pad = scratchpad(p, ts);
    memory src = chunk_input(p.a, const_cast<float*>(x) + n0 * g.C * g.H * g.W, ts.in, pad, ts.stream);
    memory dst_user(p.out.user, engine, y + n0 * g.Cout * g.P());
    memory dst = p.out.direct() ? dst_user : memory(p.out.conv, engine, ts.out.get(p.out.conv.get_size()));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_SCRATCHPAD, pad}};
    if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, bm);
    p.conv.execute(ts.stream, args);
    if (!p.out.direct()) run_reorder(*p.out.reorder, dst, dst_user, pad, ts.stream);
    ts.stream.wait();
  });
  return true;
}

bool onednn_conv2d_input_grad(const ConvGeometry& g, const float* gy, const float* w, float* gx) {
  if (!usable(g)) return false;
  const Chunks c = chunks_of(g);
  const auto prims = chunk_primitives(Dir::kInputGrad, g, c, false);
  if (!prims || !same_layout(prims->full->b, prims->tail->b)) return false;
  Buffer weights;
  memory wm = weight_memory(*prims, w, weights);
  dnnl::engine& engine = cpu_engine();
  for_chunks(c, [&](int64_t, int64_t n0, int64_t images) {
    const Primitive& p = prims->of(images, c);
    ThreadScratch& ts = thread_scratch();
    memory pad = scratchpad(p, ts);
    memory dy = chunk_input(p.a, const_cast<float*>(gy) + n0 * g.Cout * g.P(), ts.in, pad, ts.stream);
    memory dx_user(p.out.user, engine, gx + n0 * g.C * g.H * g.W);
    memory dx = p.out.direct() ? dx_user : memory(p.out.conv, engine, ts.out.get(p.out.conv.get_size()));
    p.conv.execute(ts.stream, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dx},
                               {DNNL_ARG_SCRATCHPAD, pad}});
    if (!p.out.direct()) run_reorder(*p.out.reorder, dx, dx_user, pad, ts.stream);
    ts.stream.wait();
  });
  return true;
}

bool onednn_conv2d_weight_grad(const ConvGeometry& g, const float* gy, const float* x, float* gw) {
  if (!usable(g)) return false;
  const Chunks c = chunks_of(g);
  const auto prims = chunk_primitives(Dir::kWeightGrad, g, c, false);
  if (!prims || !same_layout(prims->full->out, prims->tail->out)) return false;
  // Partial sums in the primitive's weight layout: partial k adds the
  // chunks [k * per, (k + 1) * per) in order, then the partials are added
  // in order (Note [oneDNN convolutions]). As many partials as chunks while
  // they fit in kPartialElements (a power of two fewer for large weights).
  constexpr int64_t kPartialElements = int64_t{1} << 24;
  const memory::desc& layout = prims->full->out.conv;
  const size_t bytes = layout.get_size();
  const int64_t elements = int64_t(bytes / sizeof(float));
  int64_t partials = 1;
  while (partials < c.count && partials * 2 * elements <= kPartialElements) partials *= 2;
  const int64_t per = (c.count + partials - 1) / partials;
  partials = (c.count + per - 1) / per;
  Buffer sums;
  float* S = static_cast<float*>(sums.get(bytes * size_t(partials)));
  dnnl::engine& engine = cpu_engine();
  parallel_for(partials, 1, [&](int64_t k0, int64_t k1) {
    const OneOmpThread one;
    for (int64_t k = k0; k < k1; ++k) {
      float* sum = S + k * elements;
      for (int64_t i = k * per; i < std::min(c.count, (k + 1) * per); ++i) {
        const int64_t n0 = i * c.size, images = i + 1 == c.count ? c.tail : c.size;
        const Primitive& p = prims->of(images, c);
        ThreadScratch& ts = thread_scratch();
        memory pad = scratchpad(p, ts);
        memory dy = chunk_input(p.a, const_cast<float*>(gy) + n0 * g.Cout * g.P(), ts.in, pad, ts.stream);
        memory src = chunk_input(p.b, const_cast<float*>(x) + n0 * g.C * g.H * g.W, ts.in2, pad, ts.stream);
        float* out = i == k * per ? sum : static_cast<float*>(ts.out.get(bytes));
        memory dw(layout, engine, out);
        p.conv.execute(ts.stream, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_WEIGHTS, dw},
                                   {DNNL_ARG_SCRATCHPAD, pad}});
        ts.stream.wait();
        if (out != sum) {
          for (int64_t e = 0; e < elements; ++e) sum[e] += out[e];
        }
      }
    }
  });
  parallel_for(elements, 4096, [&](int64_t b, int64_t e) {
    for (int64_t k = 1; k < partials; ++k) {
      const float* part = S + k * elements;
      for (int64_t i = b; i < e; ++i) S[i] += part[i];
    }
  });
  const Primitive& p = *prims->full;
  if (p.out.direct()) {
    std::copy(S, S + elements, gw);
  } else {
    const OneOmpThread one;
    ThreadScratch& ts = thread_scratch();
    memory pad = scratchpad(p, ts);
    memory sum(layout, engine, S), user(p.out.user, engine, gw);
    run_reorder(*p.out.reorder, sum, user, pad, ts.stream);
    ts.stream.wait();
  }
  return true;
}

}  // namespace dtr::cpu

#else  // !DTR_HAVE_ONEDNN

namespace dtr::cpu {

int64_t onednn_images_per_chunk(const ConvGeometry& g) { return std::max<int64_t>(g.N, 1); }
bool onednn_conv_available() { return false; }
void set_onednn_conv_enabled(bool) {}
bool onednn_conv_enabled() { return false; }
bool onednn_conv2d_forward(const ConvGeometry&, const float*, const float*, const float*, float*) { return false; }
bool onednn_conv2d_input_grad(const ConvGeometry&, const float*, const float*, float*) { return false; }
bool onednn_conv2d_weight_grad(const ConvGeometry&, const float*, const float*, float*) { return false; }

}  // namespace dtr::cpu

#endif  // DTR_HAVE_ONEDNN
