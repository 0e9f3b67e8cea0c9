/* dtr_c.h: the C ABI of dtr (eager tensors with Dynamic Tensor
 * Rematerialization). Pure C99/C11, callable from any language with a C FFI.
 * Link with dtr::dtr_c (CMake: find_package(dtr) then
 * target_link_libraries(app PRIVATE dtr::dtr_c)). The ABI rules are in
 * bindings/c/ABI.md; the summary:
 *
 * HANDLES. Every object (tensor, attribute list, module, optimizer, scope) is
 * an opaque 64-bit id: slot index, generation and kind, into one
 * process-wide table. 0 (DTR_NULL) is never a valid handle. A freed handle,
 * one never issued, or one of another kind (a module passed as a tensor)
 * returns DTR_ERR_INVALID_HANDLE: using a handle after dtr_*_free is an
 * error code, never undefined behaviour. A slot is reused with a new
 * generation, so a stale id cannot reach the new object. Each handle owns
 * one reference to its object: a tensor handle keeps the tensor alive (its
 * storage may still be evicted and rematerialized by the runtime); free it
 * with dtr_tensor_free. Freeing a handle frees only that reference: a
 * module's parameters stay alive while the module or a tensor handle to them
 * does.
 *
 * ERRORS. Every function returns a dtr_status: DTR_OK or the error, one code
 * per C++ exception type of dtr (core/error.h), plus the codes of this API
 * (invalid handle or argument, wrong thread, busy). The message of the most
 * recent failed call on the calling thread is dtr_last_error(); successful
 * calls leave it as it was. Out-parameters are written only on success. No
 * C++ exception crosses this ABI, and no call aborts on bad input: a null
 * out-pointer or a null array with a non-zero length is
 * DTR_ERR_INVALID_ARGUMENT.
 *
 * THREADS. Every function may be called from any thread, and calls on
 * different objects run in parallel (the remat runtime is shared and
 * thread-safe: one budget per device covers all threads).
 *  - Scopes (no-grad, autocast) are thread-local, as in PyTorch: a scope
 *    changes only the thread that opened it, must be ended on that thread
 *    (else DTR_ERR_WRONG_THREAD) and innermost first (else
 *    DTR_ERR_INVALID_ARGUMENT). A scope left open by a thread that has exited
 *    may be ended (freed) from any thread.
 *  - Modules, optimizers and attribute lists are used by one call at a time:
 *    a call on one that another thread is inside returns DTR_ERR_BUSY
 *    instead of racing (nothing is changed; retry or serialize). They are
 *    not bound to a thread: build on one, train on another.
 *  - A tensor may be read by many calls at once (as an op input, a query, a
 *    copy to the host); a call that changes it (requires_grad, backward,
 *    zero_grad, set_grad) needs it alone and returns DTR_ERR_BUSY while
 *    other calls are inside.
 *  - The flags guard the handle named in the call, not objects reached
 *    through it: a module and the optimizer over its parameters, or two
 *    graphs whose backward passes meet at one leaf, are one "model" that the
 *    caller keeps to one thread at a time (the 8-thread test gives each
 *    thread its own model).
 *  - dtr_manual_seed and the random ops share one generator: threads that
 *    draw at the same time get an interleaving of one stream.
 *
 * DEVICES are (type, index) pairs: DTR_DEVICE_CPU = 0, DTR_DEVICE_CUDA = 1.
 */
#ifndef DTR_DTR_C_H_
#define DTR_DTR_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(DTR_C_BUILDING)
#define DTR_C_API __declspec(dllexport)
#else
#define DTR_C_API __declspec(dllimport)
#endif
#else
#define DTR_C_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the C ABI this header describes. The library reports its
 * own with dtr_version(); a program may refuse to run when the majors differ
 * (see ABI.md: a major bump is the only change that may break callers). */
#define DTR_C_VERSION_MAJOR 0
#define DTR_C_VERSION_MINOR 1
#define DTR_C_VERSION_PATCH 0

/* Status codes: values are fixed; new codes are only appended. */
typedef enum dtr_status {
  DTR_OK = 0,
  DTR_ERR_VALUE = 1,             /* dtr::ValueError (Python ValueError) */
  DTR_ERR_TYPE = 2,              /* dtr::TypeError: wrong dtype, wrong attribute type */
  DTR_ERR_INDEX = 3,             /* dtr::IndexError */
  DTR_ERR_NOT_IMPLEMENTED = 4,   /* dtr::NotImplementedError */
  DTR_ERR_OUT_OF_MEMORY = 5,     /* dtr::OutOfMemoryError (budget) or host allocation failure */
  DTR_ERR_DEVICE = 6,            /* dtr::DeviceError: absent or unusable device */
  DTR_ERR_INVALID_HANDLE = 7,    /* freed, never issued, or another kind of handle */
  DTR_ERR_INVALID_ARGUMENT = 8,  /* null out-pointer or array, bad enum value, scope order */
  DTR_ERR_WRONG_THREAD = 9,      /* a thread-local scope ended on another thread */
  DTR_ERR_BUSY = 10,             /* the object is in use by a call on another thread */
  DTR_ERR_INTERNAL = 11,         /* dtr::InternalError or an unexpected exception: a bug */
  DTR_ERR_RUNTIME = 12           /* dtr::Error of no narrower type (PyTorch's RuntimeError):
                                    e.g. a second backward through a freed graph */
} dtr_status;

/* Element types: values fixed, only appended. */
typedef enum dtr_dtype {
  DTR_FLOAT32 = 0,
  DTR_FLOAT64 = 1,
  DTR_FLOAT16 = 2,
  DTR_BFLOAT16 = 3,
  DTR_INT64 = 4,
  DTR_INT32 = 5,
  DTR_BOOL = 6, /* one byte per element, 0 or 1 */
  DTR_UINT8 = 7
} dtr_dtype;

typedef enum dtr_device_type { DTR_DEVICE_CPU = 0, DTR_DEVICE_CUDA = 1 } dtr_device_type;

/* Opaque handles (see HANDLES above). */
typedef uint64_t dtr_tensor;
typedef uint64_t dtr_attrs;
typedef uint64_t dtr_module;
typedef uint64_t dtr_optimizer;
typedef uint64_t dtr_scope;
#define DTR_NULL ((uint64_t)0)

/* DLPack's managed tensor (dlpack/dlpack.h, version 0.6 or later); include
 * that header to read or build one. */
struct DLManagedTensor;

/* ---- version, errors, handles ------------------------------------------------ */

/* The library's version (the project's, equal to the C ABI's). */
DTR_C_API dtr_status dtr_version(int* major, int* minor, int* patch);
/* "0.1.0": static storage, never freed. */
DTR_C_API const char* dtr_version_string(void);
/* The message of the last failed call on this thread ("" before any): valid
 * until the next failed call on this thread. Never null. */
DTR_C_API const char* dtr_last_error(void);
/* "DTR_OK", "DTR_ERR_VALUE", ...; "unknown status" for other values. */
DTR_C_API const char* dtr_status_name(dtr_status status);
/* The number of live handles of every kind (for leak checks). */
DTR_C_API dtr_status dtr_live_handles(size_t* count);

/* ---- tensors ------------------------------------------------------------------ */

/* A new contiguous CPU tensor of `dtype` and `shape` (ndim entries, each >= 0;
 * ndim 0 is a scalar), filled with a copy of `data`, which must hold exactly
 * nbytes = numel x element size bytes (DTR_ERR_VALUE otherwise). `data` may
 * be null only when numel is 0. torch.tensor(data).reshape(shape). */
DTR_C_API dtr_status dtr_tensor_from_data(const void* data, size_t nbytes, dtr_dtype dtype,
                                          const int64_t* shape, size_t ndim, dtr_tensor* out);
/* Copies `t`'s elements, in row-major order, into `data` (`nbytes` must equal
 * numel x element size; DTR_ERR_VALUE otherwise). Works on any device and
 * layout; an evicted tensor is rematerialized first. */
DTR_C_API dtr_status dtr_tensor_to_data(dtr_tensor t, void* data, size_t nbytes);
/* Releases this handle's reference. DTR_NULL is accepted and ignored. */
DTR_C_API dtr_status dtr_tensor_free(dtr_tensor t);
/* Another handle to the same tensor (shares storage and autograd state). */
DTR_C_API dtr_status dtr_tensor_retain(dtr_tensor t, dtr_tensor* out);

DTR_C_API dtr_status dtr_tensor_ndim(dtr_tensor t, size_t* ndim);
/* Writes the sizes into shape[0..ndim) when capacity >= ndim (DTR_ERR_VALUE
 * otherwise, naming both); `ndim` (may be null) receives the dimension count. */
DTR_C_API dtr_status dtr_tensor_shape(dtr_tensor t, int64_t* shape, size_t capacity, size_t* ndim);
DTR_C_API dtr_status dtr_tensor_numel(dtr_tensor t, int64_t* numel);
DTR_C_API dtr_status dtr_tensor_dtype(dtr_tensor t, dtr_dtype* dtype);
DTR_C_API dtr_status dtr_tensor_device(dtr_tensor t, dtr_device_type* type, int* index);
/* The value of a one-element tensor (Tensor.item()); DTR_ERR_VALUE otherwise. */
DTR_C_API dtr_status dtr_tensor_item_double(dtr_tensor t, double* value);
DTR_C_API dtr_status dtr_tensor_item_int64(dtr_tensor t, int64_t* value);
/* A copy on another device (Tensor.to(device)); DTR_ERR_DEVICE when absent. */
DTR_C_API dtr_status dtr_tensor_to_device(dtr_tensor t, dtr_device_type type, int index,
                                          dtr_tensor* out);
/* The tensor's text form (Tensor.str()), in a thread-local buffer valid until
 * the next dtr_tensor_str on this thread. */
DTR_C_API dtr_status dtr_tensor_str(dtr_tensor t, const char** text);

/* DLPack (torch.utils.dlpack). Export: `*out` shares `t`'s bytes; the storage
 * is made resident and pinned until the consumer calls (*out)->deleter(*out)
 * exactly once. read_only != 0 promises the consumer never writes (the
 * storage stays evictable after the deleter runs); 0 lets it write (the
 * storage is never evicted again). Import: the new tensor aliases the
 * producer's bytes and owns `m` on success (its deleter runs once, when the
 * last tensor on it goes away); on failure `m` stays the caller's. */
DTR_C_API dtr_status dtr_tensor_to_dlpack(dtr_tensor t, int read_only, struct DLManagedTensor** out);
DTR_C_API dtr_status dtr_tensor_from_dlpack(struct DLManagedTensor* m, dtr_tensor* out);

/* ---- ops by name ----------------------------------------------------------------- */

/* An attribute list for dtr_op_call: name → int, float, bool, ints or dtype,
 * the types of the registry's ParamSpec. Setting a name twice replaces it.
 * Names longer than 31 bytes are DTR_ERR_VALUE. Checked against the op's
 * declared parameters at the call (unknown names, missing required ones:
 * DTR_ERR_VALUE; wrong types: DTR_ERR_TYPE; both naming the op and the
 * parameter); absent optional parameters take their declared defaults. */
DTR_C_API dtr_status dtr_attrs_new(dtr_attrs* out);
DTR_C_API dtr_status dtr_attrs_free(dtr_attrs a);
DTR_C_API dtr_status dtr_attrs_clear(dtr_attrs a);
DTR_C_API dtr_status dtr_attrs_set_int(dtr_attrs a, const char* name, int64_t value);
DTR_C_API dtr_status dtr_attrs_set_float(dtr_attrs a, const char* name, double value);
DTR_C_API dtr_status dtr_attrs_set_bool(dtr_attrs a, const char* name, int value);
DTR_C_API dtr_status dtr_attrs_set_ints(dtr_attrs a, const char* name, const int64_t* values,
                                        size_t n);
DTR_C_API dtr_status dtr_attrs_set_dtype(dtr_attrs a, const char* name, dtr_dtype value);

/* Runs the registry op `name` (the rows of core/op_registry.h, e.g. "add",
 * "matmul", "randn", "sum", "cross_entropy") on `inputs` with `attrs`
 * (DTR_NULL: none) under the current thread's no-grad and autocast state,
 * recording lineage and autograd like the C++ API. Writes the output handles
 * into outputs[0..n) and n into `n_outputs` (may be null). An unknown name or
 * a wrong number of inputs is DTR_ERR_VALUE naming the op. When the op has
 * more outputs than `capacity`, the call fails with DTR_ERR_VALUE after the
 * op ran (an in-place op has written its input) and no handle is made. */
DTR_C_API dtr_status dtr_op_call(const char* name, const dtr_tensor* inputs, size_t n_inputs,
                                 dtr_attrs attrs, dtr_tensor* outputs, size_t capacity,
                                 size_t* n_outputs);
/* The number of registry rows, and the name of row i (static storage). */
DTR_C_API dtr_status dtr_op_count(size_t* count);
DTR_C_API dtr_status dtr_op_name(size_t i, const char** name);
/* The declared parameters of op `name` as "dim (int), keepdim (bool)" or
 * "none" (in a thread-local buffer valid until the next dtr_op_params on this
 * thread), and into `num_inputs` (may be null) its input count: -1 when the
 * row takes a varying number (cat, optional bias) or does not declare it. */
DTR_C_API dtr_status dtr_op_params(const char* name, const char** params, int* num_inputs);

/* ---- autograd --------------------------------------------------------------------- */

DTR_C_API dtr_status dtr_tensor_set_requires_grad(dtr_tensor t, int requires_grad);
DTR_C_API dtr_status dtr_tensor_requires_grad(dtr_tensor t, int* requires_grad);
/* Tensor.backward(gradient, retain_graph); gradient DTR_NULL: a scalar's 1. */
DTR_C_API dtr_status dtr_tensor_backward(dtr_tensor t, dtr_tensor gradient, int retain_graph);
/* A new handle to t.grad, or DTR_NULL in *grad when t has none. */
DTR_C_API dtr_status dtr_tensor_grad(dtr_tensor t, dtr_tensor* grad);
/* t.grad = None (optimizer.zero_grad(set_to_none=True) for one tensor). */
DTR_C_API dtr_status dtr_tensor_zero_grad(dtr_tensor t);
/* Tensor.detach(): shares storage, no autograd history. */
DTR_C_API dtr_status dtr_tensor_detach(dtr_tensor t, dtr_tensor* out);
/* Whether this thread records autograd (torch.is_grad_enabled). */
DTR_C_API dtr_status dtr_grad_enabled(int* enabled);

/* Scopes (thread-local, see THREADS): torch.no_grad() and
 * torch.autocast(device_type, dtype) (DTR_BFLOAT16 or DTR_FLOAT16) on every
 * device type at once, each following its own op lists, until
 * dtr_scope_end, which restores the state before the scope and frees it. */
DTR_C_API dtr_status dtr_no_grad_begin(dtr_scope* out);
DTR_C_API dtr_status dtr_autocast_begin(dtr_dtype dtype, dtr_scope* out);
DTR_C_API dtr_status dtr_scope_end(dtr_scope s);

/* ---- modules (torch.nn) --------------------------------------------------------------- */

/* Parameters are created like PyTorch's (the global generator: seed first
 * with dtr_manual_seed for reproducible models). */
DTR_C_API dtr_status dtr_nn_linear(int64_t in_features, int64_t out_features, int bias,
                                   dtr_module* out);
/* Square kernel, stride, padding; dilation 1. */
DTR_C_API dtr_status dtr_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                   int64_t stride, int64_t padding, int64_t groups, int bias,
                                   dtr_module* out);
/* momentum < 0: cumulative moving average (PyTorch's momentum=None). */
DTR_C_API dtr_status dtr_nn_batch_norm2d(int64_t num_features, double eps, double momentum,
                                         dtr_module* out);
DTR_C_API dtr_status dtr_nn_layer_norm(const int64_t* normalized_shape, size_t ndim, double eps,
                                       int elementwise_affine, dtr_module* out);
DTR_C_API dtr_status dtr_nn_embedding(int64_t num_embeddings, int64_t embedding_dim,
                                      dtr_module* out);
DTR_C_API dtr_status dtr_nn_dropout(double p, dtr_module* out);
DTR_C_API dtr_status dtr_nn_relu(dtr_module* out);
/* approximate: "none" (erf) or "tanh". */
DTR_C_API dtr_status dtr_nn_gelu(const char* approximate, dtr_module* out);
DTR_C_API dtr_status dtr_nn_causal_self_attention(int64_t n_embd, int64_t n_head, double dropout,
                                                  int bias, dtr_module* out);
/* An empty Sequential; dtr_nn_sequential_append adds a module (the sequence
 * holds its own reference: `m`'s handle stays valid and separate). A
 * Sequential also serves as a container (ModuleList) whose
 * dtr_module_parameters are all its children's. */
DTR_C_API dtr_status dtr_nn_sequential(dtr_module* out);
DTR_C_API dtr_status dtr_nn_sequential_append(dtr_module seq, dtr_module m);

DTR_C_API dtr_status dtr_module_free(dtr_module m);
/* module(x). */
DTR_C_API dtr_status dtr_module_forward(dtr_module m, dtr_tensor x, dtr_tensor* out);
/* module.train(on) / module.eval(). */
DTR_C_API dtr_status dtr_module_train(dtr_module m, int on);
/* New handles to module.parameters() in order, into params[0..n) when
 * capacity >= n (DTR_ERR_VALUE otherwise); n in *count (may be null). With
 * params null and capacity 0, only counts. */
DTR_C_API dtr_status dtr_module_parameters(dtr_module m, dtr_tensor* params, size_t capacity,
                                           size_t* count);
DTR_C_API dtr_status dtr_module_zero_grad(dtr_module m);
/* state_dict to / from a safetensors file (eager/serialize.h); load is strict. */
DTR_C_API dtr_status dtr_module_save(dtr_module m, const char* path);
DTR_C_API dtr_status dtr_module_load(dtr_module m, const char* path);

/* ---- optimizers (torch.optim) ---------------------------------------------------------- */

/* Over the given parameter tensors (the optimizer keeps its own references). */
DTR_C_API dtr_status dtr_optim_sgd(const dtr_tensor* params, size_t n, double lr, double momentum,
                                   double weight_decay, int nesterov, dtr_optimizer* out);
DTR_C_API dtr_status dtr_optim_adamw(const dtr_tensor* params, size_t n, double lr, double beta1,
                                     double beta2, double eps, double weight_decay,
                                     dtr_optimizer* out);
DTR_C_API dtr_status dtr_optimizer_free(dtr_optimizer o);
DTR_C_API dtr_status dtr_optimizer_step(dtr_optimizer o);
/* Sets every parameter's grad to none. */
DTR_C_API dtr_status dtr_optimizer_zero_grad(dtr_optimizer o);
DTR_C_API dtr_status dtr_optimizer_set_lr(dtr_optimizer o, double lr);
DTR_C_API dtr_status dtr_optimizer_lr(dtr_optimizer o, double* lr);

/* ---- memory budget, statistics, options, seed ----------------------------------------- */

/* The budget of one device in bytes (> 0; DTR_ERR_VALUE for 0); bytes < 0
 * removes it (unlimited). Lowering it evicts what no longer fits now (what
 * cannot be evicted stays: the next allocation that does not fit is then
 * DTR_ERR_OUT_OF_MEMORY). DTR_ERR_DEVICE for a device that is absent. */
DTR_C_API dtr_status dtr_set_memory_budget(dtr_device_type type, int index, int64_t bytes);
/* -1 when unlimited. */
DTR_C_API dtr_status dtr_memory_budget(dtr_device_type type, int index, int64_t* bytes);

/* Indices into dtr_stats' array (remat::Stats); only appended. */
typedef enum dtr_stat {
  DTR_STAT_BUDGET_BYTES = 0, /* -1: unlimited */
  DTR_STAT_RESIDENT_BYTES = 1,
  DTR_STAT_PEAK_BYTES = 2,
  DTR_STAT_EVICTIONS = 3,
  DTR_STAT_EAGER_FREES = 4,
  DTR_STAT_REMATERIALIZATIONS = 5,
  DTR_STAT_RECOMPUTED_OPS = 6,
  DTR_STAT_RECOMPUTED_FLOPS = 7,
  DTR_STAT_RECOMPUTE_SECONDS_ESTIMATED = 8,
  DTR_STAT_RECOMPUTE_SECONDS_MEASURED = 9,
  DTR_STAT_METADATA_NODES = 10,
  DTR_STAT_LIVE_STORAGES = 11,
  /* The host tier (DTR_SWAP; Note [host tier] in docs/DESIGN.md). */
  DTR_STAT_SWAP_OUTS = 12,
  DTR_STAT_SWAP_INS = 13,
  DTR_STAT_SWAPPED_BYTES = 14,         /* of this device, in host memory now */
  DTR_STAT_SWAP_BYTES_OUT = 15,
  DTR_STAT_SWAP_BYTES_IN = 16,
  DTR_STAT_SWAP_SECONDS_ESTIMATED = 17,
  DTR_STAT_HOST_TIER_BYTES = 18,       /* on the cpu: bytes held for other devices */
  DTR_STAT_COUNT = 19 /* grows when statistics are added */
} dtr_stat;
/* One snapshot of a device's statistics: values[i] for i < min(n, DTR_STAT_COUNT)
 * (counts and bytes as exact doubles). An older caller passing a smaller n
 * stays correct. */
DTR_C_API dtr_status dtr_stats(dtr_device_type type, int index, double* values, size_t n);
/* Restarts every device's counters (peak = resident now). */
DTR_C_API dtr_status dtr_reset_stats(void);

/* Sets an option by its environment variable name ("DTR_HEURISTIC",
 * "DTR_MEMORY_BUDGET", "DTR_LOG", ... core/options.h), parsed as the
 * environment is ("" restores the default), and applies it to the running
 * runtime: C++'s set_option(global_options(), name, value), one path. On an
 * error nothing changes. DTR_ERR_VALUE for an unknown name or malformed value
 * (naming the accepted forms), for DTR_PLAN (start-up only) and for switching
 * DTR_ONEDNN_GEMM while lineage exists; DTR_ERR_DEVICE for a DTR_MEMORY_BUDGET
 * entry naming a device that is not present (cuda:0 without a driver). */
DTR_C_API dtr_status dtr_set_option(const char* name, const char* value);
/* torch.manual_seed. */
DTR_C_API dtr_status dtr_manual_seed(uint64_t seed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DTR_DTR_C_H_ */
