// dtr: an eager tensor library with Dynamic Tensor Rematerialization.
// The one header users include.
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/options.h"
#include "core/parallel.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "eager/autocast.h"
#include "eager/autograd.h"
#include "eager/checkpoint.h"
#include "eager/dispatch.h"
#include "eager/ops.h"
#include "eager/random.h"
#include "eager/tensor.h"
#include "remat/runtime.h"
#include "remat/trace.h"
#include "eager/nn/attention.h"
#include "eager/nn/init.h"
#include "eager/nn/layers.h"
#include "eager/nn/module.h"
#include "eager/nn/state_dict.h"
#include "eager/optim.h"
#include "eager/serialize.h"
// @@nn-headers@@
