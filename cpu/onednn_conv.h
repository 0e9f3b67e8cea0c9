// float32 conv2d, its input gradient and its weight gradient through oneDNN
// (cpu/onednn_conv.cpp), the fast path of cpu/conv.cpp's kernels; see
// Note [oneDNN convolutions] there. Built when CMake finds oneDNN (Debian:
// libdnnl-dev); without it every function here returns false and the
// im2col + GEMM kernels run.
#pragma once

#include <cstdint>

namespace dtr::cpu {

// Geometry of one conv2d call (PyTorch's semantics: dilation 1 is a dense
// kernel), from the attributes and the operand shapes.
struct ConvGeometry {
  int64_t N, C, H, W;        // input
  int64_t Cout, Cg, kH, kW;  // weight (Cout, C / groups, kH, kW)
  int64_t Ho, Wo;            // output spatial size
  int64_t sH, sW, pH, pW, dH, dW, groups;
  int64_t Og() const { return Cout / groups; }
  int64_t kk() const { return Cg * kH * kW; }  // rows of the column matrix
  int64_t P() const { return Ho * Wo; }        // columns per image
};

// Each computes the whole result into contiguous NCHW / OIHW float32
// memory and returns true, or returns false having written nothing when
// oneDNN is not built in, is switched off, or rejects the shapes (the caller
// then runs im2col). bias may be null.
bool onednn_conv2d_forward(const ConvGeometry& g, const float* x, const float* w,
                           const float* bias, float* y);
bool onednn_conv2d_input_grad(const ConvGeometry& g, const float* gy, const float* w, float* gx);
bool onednn_conv2d_weight_grad(const ConvGeometry& g, const float* gy, const float* x, float* gw);

/// Images per oneDNN call: a function of the geometry alone.
int64_t onednn_images_per_chunk(const ConvGeometry& g);

/// Whether the oneDNN path is built in and its threading can be pinned.
bool onednn_conv_available();
/// Switches the oneDNN path off (true: on, the default) for the whole
/// process, so that tests can compare it with im2col. Results change with
/// it: not for use while lineage recorded under the other setting may replay.
void set_onednn_conv_enabled(bool enabled);
bool onednn_conv_enabled();

}  // namespace dtr::cpu
