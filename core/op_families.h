// The one list of op families. eager/ops/<family>.cpp defines the family's
// rows in dtr::ops::register_<family>_ops(); cpu/<family>.cpp binds their CPU
// kernels in dtr::cpu::register_<family>_kernels() (the view family's only
// kernels, the gradient scatters of slice and select, live in cpu/index.cpp).
// Rows are defined in this order, so op ids follow it. A new family is one
// line here plus its two files.
#pragma once

#define DTR_OP_FAMILIES(X) \
  X(copy)                  \
  X(creation)              \
  X(view)                  \
  X(index)                 \
  X(linalg)                \
  X(conv)                  \
  X(nn_functional)         \
  X(unary)                 \
  X(binary)                \
  X(reduce)                \
  X(loss)                  \
  X(norm)                  \
  X(sort)                  \
  X(resample)              \
  X(attention)
