/* Trains the MLP of examples/train_mlp.cpp through dtr's C ABI (dtr_c.h),
 * as a program embedding the library would: a synthetic task (x ~ N(0, I) in
 * 16 dims, label = argmax(x . W_teacher) over 4 classes), the model
 * Linear(16, 64) -> GELU -> 7 x (Linear(64, 64) -> GELU) -> Linear(64, 4),
 * cross-entropy, AdamW, batch 1024, a fresh batch every step. Deep and
 * narrow, so that activations are most of the peak and half of it trains
 * (train_mlp.cpp says more).
 *
 * With --budget-fraction F it first measures the peak of two training steps
 * with no budget (a model built from the same seed, then dropped) and trains
 * under F times that peak: the losses stay bitwise the same as with no
 * budget. It prints the loss every 20 steps and the figures of the C++
 * examples (examples/common.h): the memory line, the final loss and
 * accuracy, the exact "stats:" line and the closing summary.
 *
 *   train_mlp_c [--steps 200] [--seed 0] [--batch 1024] [--budget-fraction F]
 *
 * Exit codes as the C++ examples: 0 success, 1 an error, 2 a bad command
 * line, 3 the budget is below what the model needs (DTR_ERR_OUT_OF_MEMORY). */
#include <dtr/dtr_c.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* kDepth hidden layers of kHidden units (a Linear and a GELU each), then the
 * output Linear: kLayers modules. */
enum { kInputs = 16, kHidden = 64, kDepth = 8, kClasses = 4, kLayers = 2 * kDepth + 1 };

/* --batch: 1024 as in train_mlp.cpp; activations, which a budget can evict,
 * grow with it, the parameters and AdamW state, which it cannot, do not. */
static int64_t g_batch = 1024;

/* Any failed call ends the program with the library's message. */
static void check(dtr_status s, const char* what) {
  if (s == DTR_OK) return;
  fprintf(stderr, "train_mlp_c: %s: %s: %s\n", what, dtr_status_name(s), dtr_last_error());
  exit(s == DTR_ERR_OUT_OF_MEMORY ? 3 : 1);
}
#define CHECK(call) check((call), #call)

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double to_mib(double bytes) { return bytes / (1024.0 * 1024.0); }

/* The one output of op `name` on `n` inputs. */
static dtr_tensor call(const char* name, const dtr_tensor* inputs, size_t n, dtr_attrs attrs) {
  dtr_tensor out = DTR_NULL;
  size_t count = 0;
  check(dtr_op_call(name, inputs, n, attrs, &out, 1, &count), name);
  return out;
}

/* randn(rows, cols) as float32 on the CPU, from the global generator. */
static dtr_tensor randn2(int64_t rows, int64_t cols) {
  const int64_t shape[2] = {rows, cols};
  dtr_attrs a = DTR_NULL;
  CHECK(dtr_attrs_new(&a));
  CHECK(dtr_attrs_set_ints(a, "shape", shape, 2));
  CHECK(dtr_attrs_set_dtype(a, "dtype", DTR_FLOAT32));
  CHECK(dtr_attrs_set_int(a, "device_type", DTR_DEVICE_CPU));
  CHECK(dtr_attrs_set_int(a, "device_index", 0));
  dtr_tensor t = call("randn", NULL, 0, a);
  CHECK(dtr_attrs_free(a));
  return t;
}

/* argmax(t, dim=1). */
static dtr_tensor argmax1(dtr_tensor t) {
  dtr_attrs a = DTR_NULL;
  CHECK(dtr_attrs_new(&a));
  CHECK(dtr_attrs_set_int(a, "dim", 1));
  dtr_tensor out = call("argmax", &t, 1, a);
  CHECK(dtr_attrs_free(a));
  return out;
}

typedef struct {
  dtr_tensor x, y;
} Batch;

/* A fresh batch: inputs and their teacher labels, with no autograd. */
static Batch next_batch(dtr_tensor teacher) {
  dtr_scope no_grad = DTR_NULL;
  CHECK(dtr_no_grad_begin(&no_grad));
  Batch b;
  b.x = randn2(g_batch, kInputs);
  const dtr_tensor mm_in[2] = {b.x, teacher};
  dtr_tensor scores = call("matmul", mm_in, 2, DTR_NULL);
  b.y = argmax1(scores);
  CHECK(dtr_tensor_free(scores));
  CHECK(dtr_scope_end(no_grad));
  return b;
}

static void free_batch(Batch b) {
  CHECK(dtr_tensor_free(b.x));
  CHECK(dtr_tensor_free(b.y));
}

typedef struct {
  dtr_module net; /* the Sequential */
  dtr_optimizer opt;
  dtr_tensor teacher;
  size_t n_params;
  long long n_elements;
} Model;

/* The teacher and the model from `seed`, as train_mlp.cpp builds them. */
static Model build(uint64_t seed) {
  Model m;
  CHECK(dtr_manual_seed(seed));
  m.teacher = randn2(kInputs, kClasses);
  CHECK(dtr_nn_sequential(&m.net));
  dtr_module layers[kLayers];
  for (int d = 0; d < kDepth; ++d) {
    CHECK(dtr_nn_linear(d == 0 ? kInputs : kHidden, kHidden, 1, &layers[2 * d]));
    CHECK(dtr_nn_gelu("none", &layers[2 * d + 1]));
  }
  CHECK(dtr_nn_linear(kHidden, kClasses, 1, &layers[kLayers - 1]));
  for (int i = 0; i < kLayers; ++i) {
    CHECK(dtr_nn_sequential_append(m.net, layers[i]));
    CHECK(dtr_module_free(layers[i])); /* the Sequential keeps its own reference */
  }
  CHECK(dtr_module_parameters(m.net, NULL, 0, &m.n_params));
  dtr_tensor* params = malloc(m.n_params * sizeof *params);
  if (params == NULL) exit(1);
  CHECK(dtr_module_parameters(m.net, params, m.n_params, NULL));
  m.n_elements = 0;
  for (size_t i = 0; i < m.n_params; ++i) {
    int64_t numel = 0;
    CHECK(dtr_tensor_numel(params[i], &numel));
    m.n_elements += numel;
  }
  CHECK(dtr_optim_adamw(params, m.n_params, 1e-3, 0.9, 0.999, 1e-8, 0.01, &m.opt));
  for (size_t i = 0; i < m.n_params; ++i) CHECK(dtr_tensor_free(params[i]));
  free(params);
  return m;
}

static void destroy(Model m) {
  CHECK(dtr_optimizer_free(m.opt));
  CHECK(dtr_module_free(m.net));
  CHECK(dtr_tensor_free(m.teacher));
}

/* One training step; returns the loss. */
static double train_step(Model* m) {
  const Batch b = next_batch(m->teacher);
  CHECK(dtr_optimizer_zero_grad(m->opt));
  dtr_tensor logits = DTR_NULL;
  CHECK(dtr_module_forward(m->net, b.x, &logits));
  const dtr_tensor ce_in[2] = {logits, b.y};
  dtr_tensor loss = call("cross_entropy", ce_in, 2, DTR_NULL);
  CHECK(dtr_tensor_backward(loss, DTR_NULL, 0));
  double value = 0;
  CHECK(dtr_tensor_item_double(loss, &value));
  /* Dropping the loss lets the runtime prune its lineage before the update. */
  CHECK(dtr_tensor_free(loss));
  CHECK(dtr_tensor_free(logits));
  free_batch(b);
  CHECK(dtr_optimizer_step(m->opt));
  return value;
}

static double accuracy(Model* m) {
  CHECK(dtr_module_train(m->net, 0));
  const Batch test = next_batch(m->teacher);
  dtr_scope no_grad = DTR_NULL;
  CHECK(dtr_no_grad_begin(&no_grad));
  dtr_tensor logits = DTR_NULL;
  CHECK(dtr_module_forward(m->net, test.x, &logits));
  dtr_tensor pred = argmax1(logits);
  const dtr_tensor eq_in[2] = {pred, test.y};
  dtr_tensor correct = call("eq", eq_in, 2, DTR_NULL);
  dtr_attrs a = DTR_NULL;
  CHECK(dtr_attrs_new(&a));
  CHECK(dtr_attrs_set_dtype(a, "dtype", DTR_FLOAT32));
  dtr_tensor as_float = call("to_dtype", &correct, 1, a);
  CHECK(dtr_attrs_clear(a));
  const int64_t dim0 = 0;
  CHECK(dtr_attrs_set_ints(a, "dims", &dim0, 1));
  dtr_tensor mean = call("mean", &as_float, 1, a);
  double acc = 0;
  CHECK(dtr_tensor_item_double(mean, &acc));
  CHECK(dtr_attrs_free(a));
  const dtr_tensor tmp[5] = {logits, pred, correct, as_float, mean};
  for (int i = 0; i < 5; ++i) CHECK(dtr_tensor_free(tmp[i]));
  CHECK(dtr_scope_end(no_grad));
  free_batch(test);
  return acc;
}

static double stat(int which) {
  double values[DTR_STAT_COUNT];
  CHECK(dtr_stats(DTR_DEVICE_CPU, 0, values, DTR_STAT_COUNT));
  return values[which];
}

static int usage(const char* prog, const char* message) {
  fprintf(stderr, "%s: %s\nusage: %s [--steps N] [--seed N] [--batch N] [--budget-fraction F]\n", prog, message,
          prog);
  return 2;
}

int main(int argc, char** argv) {
  long steps = 200;
  unsigned long long seed = 0;
  double fraction = -1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0) {
      printf("usage: %s [--steps N] [--seed N] [--batch N] [--budget-fraction F]\n", argv[0]);
      return 0;
    }
    if (i + 1 >= argc) return usage(argv[0], "every flag needs a value");
    char* end = NULL;
    const char* v = argv[++i];
    if (strcmp(argv[i - 1], "--steps") == 0) steps = strtol(v, &end, 10);
    else if (strcmp(argv[i - 1], "--seed") == 0) seed = strtoull(v, &end, 10);
    else if (strcmp(argv[i - 1], "--batch") == 0) g_batch = strtoll(v, &end, 10);
    else if (strcmp(argv[i - 1], "--budget-fraction") == 0) fraction = strtod(v, &end);
    else return usage(argv[0], "unknown flag");
    if (end == v || *end != '\0') return usage(argv[0], "malformed number");
  }
  if (steps <= 0) return usage(argv[0], "--steps must be > 0");
  if (g_batch <= 0) return usage(argv[0], "--batch must be > 0");
  if (fraction != -1 && !(fraction > 0 && fraction <= 1)) {
    return usage(argv[0], "--budget-fraction must be in (0, 1]");
  }

  int major, minor, patch;
  CHECK(dtr_version(&major, &minor, &patch));
  if (major != DTR_C_VERSION_MAJOR) {
    fprintf(stderr, "train_mlp_c: built against dtr %d.x, running with %d.%d.%d\n",
            DTR_C_VERSION_MAJOR, major, minor, patch);
    return 1;
  }

  /* The budget: F x the measured peak of two steps of the same model. */
  double unbudgeted_peak = -1;
  int64_t budget = -1;
  if (fraction > 0) {
    CHECK(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, -1));
    CHECK(dtr_reset_stats());
    Model probe = build(seed);
    train_step(&probe);
    train_step(&probe);
    unbudgeted_peak = stat(DTR_STAT_PEAK_BYTES);
    destroy(probe);
    budget = (int64_t)llround(fraction * unbudgeted_peak);
    if (budget < 1) budget = 1;
    CHECK(dtr_set_memory_budget(DTR_DEVICE_CPU, 0, budget));
  } else {
    CHECK(dtr_memory_budget(DTR_DEVICE_CPU, 0, &budget));
  }

  Model m = build(seed);
  printf("train_mlp_c: dtr %s, %lld parameters, batch %lld, %ld steps\n", dtr_version_string(),
         m.n_elements, (long long)g_batch, steps);
  if (fraction > 0) {
    printf("memory: one training step needs %.1f MiB with no budget; budget %.2f x that = %.1f MiB\n",
           to_mib(unbudgeted_peak), fraction, to_mib((double)budget));
  } else if (budget >= 0) {
    printf("memory: budget %.1f MiB (from DTR_MEMORY_BUDGET)\n", to_mib((double)budget));
  } else {
    printf("memory: no budget (--budget-fraction 0.5 sets one at half the peak; DTR_MEMORY_BUDGET=SIZE caps it in bytes)\n");
  }

  CHECK(dtr_reset_stats());
  const double start = now_seconds();
  double loss = 0;
  for (long step = 1; step <= steps; ++step) {
    loss = train_step(&m);
    if (step % 20 == 0 || step == 1) printf("step %4ld  loss %.6f\n", step, loss);
  }
  const double seconds = now_seconds() - start;
  const double acc = accuracy(&m);

  double s[DTR_STAT_COUNT];
  CHECK(dtr_stats(DTR_DEVICE_CPU, 0, s, DTR_STAT_COUNT));
  printf("final loss %.6f  held-out accuracy %.3f  (%.2f s, %.1f ms/step)\n", loss, acc, seconds,
         1e3 * seconds / (double)steps);
  printf("stats: peak_bytes %lld budget_bytes %lld unbudgeted_peak_bytes %lld evictions %lld "
         "rematerializations %lld recompute_seconds %.3f train_seconds %.3f\n",
         (long long)s[DTR_STAT_PEAK_BYTES], (long long)budget, (long long)unbudgeted_peak,
         (long long)s[DTR_STAT_EVICTIONS], (long long)s[DTR_STAT_REMATERIALIZATIONS],
         s[DTR_STAT_RECOMPUTE_SECONDS_MEASURED], seconds);
  const double base = seconds - s[DTR_STAT_RECOMPUTE_SECONDS_MEASURED];
  const double extra = base > 0 ? 100.0 * s[DTR_STAT_RECOMPUTE_SECONDS_MEASURED] / base : 0.0;
  if (budget >= 0 && unbudgeted_peak >= 0) {
    printf("peak %.1f MiB under a budget of %.1f MiB; the same run needs %.1f MiB without one, at "
           "%.0f%% more compute time (%lld evictions, %lld rematerializations)\n",
           to_mib(s[DTR_STAT_PEAK_BYTES]), to_mib((double)budget), to_mib(unbudgeted_peak), extra,
           (long long)s[DTR_STAT_EVICTIONS], (long long)s[DTR_STAT_REMATERIALIZATIONS]);
  } else if (budget >= 0) {
    printf("peak %.1f MiB under a budget of %.1f MiB (DTR_MEMORY_BUDGET), at %.0f%% more compute "
           "time for rematerialization (%lld evictions, %lld rematerializations)\n",
           to_mib(s[DTR_STAT_PEAK_BYTES]), to_mib((double)budget), extra,
           (long long)s[DTR_STAT_EVICTIONS], (long long)s[DTR_STAT_REMATERIALIZATIONS]);
  } else {
    printf("peak %.1f MiB with no budget; run with --budget-fraction 0.5 to train in half of it\n",
           to_mib(s[DTR_STAT_PEAK_BYTES]));
  }
  destroy(m);
  size_t live = 0;
  CHECK(dtr_live_handles(&live));
  if (live != 0) {
    fprintf(stderr, "train_mlp_c: %zu handles left alive\n", live);
    return 1;
  }
  return 0;
}
