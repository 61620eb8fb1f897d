// pto_orchestration_api.h -- the orchestration API subset for pypto_build's
// `host` platform.
//
// Written by pypto_build (not copied from the PyPTO runtime). It offers, with
// the real API's names and meaning, what simple generated orchestration code
// uses: ChipTaskArgs, CoreTaskArgs (add_input/add_output/add_inout/add_scalar),
// TensorCreateInfo, TaskOutputTensors::get_ref, alloc_tensors,
// rt_submit_aic_task / rt_submit_aiv_task, rt_scope_begin / rt_scope_end,
// PTO2_SCOPE() { ... }, LOG_* and PTO2OrchestrationConfig. Anything else
// (MixedKernels, get/set_tensor_data, parallel-for, ...) is deliberately
// absent, so code that needs it fails at compile time instead of misbehaving.
//
// Binding contract between an orchestration .so and the host executor
// ---------------------------------------------------------------------
// 1. The executor dlopens the .so (RTLD_LOCAL) and checks
//      extern "C" uint32_t pto_host_runtime_abi_version(void)
//    against the PTO_HOST_RUNTIME_ABI_VERSION it was written for.
// 2. It fills a PTO2RuntimeOps table (plain C types: ctypes can build it) and
//    calls   extern "C" int32_t pto_host_bind_runtime(const PTO2RuntimeOps*);
//    0 = bound, -1 = abi_version/struct_size mismatch, -2 = a required op is
//    null; nullptr unbinds. The table must stay alive while bound. The binding
//    is per .so (a hidden symbol), so several .so files can be bound at once.
// 3. It calls aicpu_orchestration_config(const ChipTaskArgs&) if exported,
//    then aicpu_orchestration_entry(const ChipTaskArgs&). ChipTaskArgs is a
//    24-byte record {ChipTensor* tensors; const uint64_t* scalars;
//    uint32_t tensor_count; uint32_t scalar_count} that the executor owns; the
//    tensors array holds 128-byte, 64-byte-aligned ChipTensor records.
// 4. During the entry the code calls back through the table:
//    * alloc_tensors(ctx, recs, n): each record is filled from a
//      TensorCreateInfo (shape, strides, dtype, buffer.size in bytes,
//      buffer.addr == 0); the executor sets buffer.addr to zeroed memory that
//      stays valid until the run ends (it may free it earlier only after every
//      task that uses it has run). Returns 0, or nonzero on failure.
//    * submit_task(ctx, core_type, func_id, tensors, arg_types, n, scalars, m):
//      one task in submission order (core_type 0 = AIC, 1 = AIV). The kernel's
//      args[] are the tensors' addresses, then the scalars' raw bits. Pointers
//      are valid only during the call: copy the records if the task runs
//      later. Returns >= 0 (a task id), or < 0 on failure.
//    * scope_begin / scope_end (always balanced), is_fatal, report_fatal, log.
//    After a fatal report every submit is skipped; the executor must check its
//    fatal state after the entry returns and fail the run.
// Calling any API before binding prints a message and aborts.

#ifndef PYPTO_BUILD_HOST_PTO_ORCHESTRATION_API_H_
#define PYPTO_BUILD_HOST_PTO_ORCHESTRATION_API_H_

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "tensor.h"

// Bump on any change of PTO2RuntimeOps, ChipTaskArgs or the call protocol.
constexpr uint32_t PTO_HOST_RUNTIME_ABI_VERSION = 1;

constexpr uint32_t CORE_MAX_TENSOR_ARGS = 32;  // tensors per task
constexpr uint32_t CORE_MAX_SCALAR_ARGS = 16;  // scalars per task
constexpr uint32_t PTO2_MAX_OUTPUTS = 16;      // runtime-created outputs per task

// core_type values passed to submit_task.
enum : int32_t { PTO_HOST_CORE_AIC = 0, PTO_HOST_CORE_AIV = 1 };

// arg_types values passed to submit_task (one per tensor).
enum : int32_t {
    PTO_HOST_ARG_INPUT = 0,            // add_input
    PTO_HOST_ARG_OUTPUT = 1,           // add_output(TensorCreateInfo): runtime-created
    PTO_HOST_ARG_INOUT = 2,            // add_inout
    PTO_HOST_ARG_OUTPUT_EXISTING = 3,  // add_output(const ChipTensor&)
    PTO_HOST_ARG_NO_DEP = 4,           // add_no_dep
};

// level values passed to log.
enum : int32_t {
    PTO_HOST_LOG_DEBUG = 0,
    PTO_HOST_LOG_INFO = 1,
    PTO_HOST_LOG_WARN = 2,
    PTO_HOST_LOG_ERROR = 3,
    PTO_HOST_LOG_ALWAYS = 4,
};

// code passed to report_fatal by this header itself.
enum : int32_t { PTO_HOST_ERROR_INVALID_ARGS = 1, PTO_HOST_ERROR_RUNTIME = 2 };

// ---------------------------------------------------------------------------
// Ops table (filled by the executor) and its binding.
// ---------------------------------------------------------------------------

extern "C" {

struct PTO2RuntimeOps {
    uint32_t abi_version;  // = PTO_HOST_RUNTIME_ABI_VERSION
    uint32_t struct_size;  // = sizeof(PTO2RuntimeOps)
    void* ctx;             // passed back as the first argument of every op
    // Required.
    int32_t (*submit_task)(void* ctx, int32_t core_type, int32_t func_id, const ChipTensor* const* tensors,
                           const int32_t* arg_types, uint32_t tensor_count, const uint64_t* scalars,
                           uint32_t scalar_count);
    void (*scope_begin)(void* ctx);
    void (*scope_end)(void* ctx);
    int32_t (*alloc_tensors)(void* ctx, ChipTensor* tensors, uint32_t count);
    int32_t (*is_fatal)(void* ctx);
    void (*report_fatal)(void* ctx, int32_t code, const char* func, const char* msg);
    // Optional: null sends log lines to stderr.
    void (*log)(void* ctx, int32_t level, const char* func, const char* msg);
};

// The bound table. Weak so every translation unit of one .so shares it,
// hidden so each .so has its own.
__attribute__((weak, visibility("hidden"))) const PTO2RuntimeOps* pto_host_runtime_ops_ = nullptr;

__attribute__((weak, visibility("default"))) uint32_t pto_host_runtime_abi_version(void) {
    return PTO_HOST_RUNTIME_ABI_VERSION;
}

__attribute__((weak, visibility("default"))) int32_t pto_host_bind_runtime(const PTO2RuntimeOps* ops) {
    if (ops == nullptr) {
        pto_host_runtime_ops_ = nullptr;
        return 0;
    }
    if (ops->abi_version != PTO_HOST_RUNTIME_ABI_VERSION || ops->struct_size != sizeof(PTO2RuntimeOps)) {
        return -1;
    }
    if (!ops->submit_task || !ops->scope_begin || !ops->scope_end || !ops->alloc_tensors || !ops->is_fatal ||
        !ops->report_fatal) {
        return -2;
    }
    pto_host_runtime_ops_ = ops;
    return 0;
}

}  // extern "C"

static_assert(sizeof(PTO2RuntimeOps) == 16 + 7 * sizeof(void*), "PTO2RuntimeOps: no hidden padding");

static inline const PTO2RuntimeOps* pto_host_ops(const char* caller) {
    const PTO2RuntimeOps* ops = pto_host_runtime_ops_;
    if (ops == nullptr) {
        std::fprintf(stderr, "pto_orchestration_api (host): %s called before pto_host_bind_runtime\n", caller);
        std::abort();
    }
    return ops;
}

__attribute__((format(printf, 3, 4))) static inline void pto_host_log(int32_t level, const char* func,
                                                                       const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const PTO2RuntimeOps* ops = pto_host_ops("LOG_*");
    if (ops->log) {
        ops->log(ops->ctx, level, func, msg);
    } else {
        std::fprintf(stderr, "[orch %d] %s: %s\n", static_cast<int>(level), func, msg);
    }
}

__attribute__((format(printf, 3, 4))) static inline void pto_host_report_fatal(int32_t code, const char* func,
                                                                                const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const PTO2RuntimeOps* ops = pto_host_ops("rt_report_fatal");
    ops->report_fatal(ops->ctx, code, func, msg);
}

#define LOG_DEBUG(fmt, ...) pto_host_log(PTO_HOST_LOG_DEBUG, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_INFO(fmt, ...) pto_host_log(PTO_HOST_LOG_INFO, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_WARN(fmt, ...) pto_host_log(PTO_HOST_LOG_WARN, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_ERROR(fmt, ...) pto_host_log(PTO_HOST_LOG_ERROR, __FUNCTION__, fmt, ##__VA_ARGS__)
#define LOG_ALWAYS(fmt, ...) pto_host_log(PTO_HOST_LOG_ALWAYS, __FUNCTION__, fmt, ##__VA_ARGS__)
#define rt_report_fatal(code, fmt, ...) pto_host_report_fatal((code), __FUNCTION__, fmt, ##__VA_ARGS__)

static inline bool rt_is_fatal() {
    const PTO2RuntimeOps* ops = pto_host_ops("rt_is_fatal");
    return ops->is_fatal(ops->ctx) != 0;
}

// A zeroed record handed out after an out-of-range access has been reported.
static inline ChipTensor& pto_host_dummy_tensor() {
    static ChipTensor dummy{};
    dummy = ChipTensor{};
    return dummy;
}

// ---------------------------------------------------------------------------
// Orchestration arguments.
// ---------------------------------------------------------------------------

// One external tensor of the orchestration call; ref() is the record itself.
class ChipTensorArg {
public:
    explicit ChipTensorArg(ChipTensor* t) : t_(t) {}
    ChipTensor& ref() const { return *t_; }
    ChipTensor* ptr() const { return t_; }

private:
    ChipTensor* t_;
};

// What aicpu_orchestration_entry receives. Filled by the executor.
struct ChipTaskArgs {
    ChipTensor* tensors_;
    const uint64_t* scalars_;
    uint32_t tensor_count_;
    uint32_t scalar_count_;

    uint32_t tensor_count() const { return tensor_count_; }
    uint32_t scalar_count() const { return scalar_count_; }

    ChipTensorArg tensor(uint32_t i) const {
        if (i >= tensor_count_) {
            rt_report_fatal(PTO_HOST_ERROR_INVALID_ARGS, "orch_args.tensor(%u) out of range (%u tensors)", i,
                            tensor_count_);
            return ChipTensorArg(&pto_host_dummy_tensor());
        }
        return ChipTensorArg(&tensors_[i]);
    }

    // The raw 64-bit pattern of scalar i.
    uint64_t scalar(uint32_t i) const {
        if (i >= scalar_count_) {
            rt_report_fatal(PTO_HOST_ERROR_INVALID_ARGS, "orch_args.scalar(%u) out of range (%u scalars)", i,
                            scalar_count_);
            return 0;
        }
        return scalars_[i];
    }
};

static_assert(std::is_standard_layout<ChipTaskArgs>::value, "ChipTaskArgs is read by the executor");
static_assert(sizeof(ChipTaskArgs) == 24 && offsetof(ChipTaskArgs, scalars_) == 8 &&
                  offsetof(ChipTaskArgs, tensor_count_) == 16 && offsetof(ChipTaskArgs, scalar_count_) == 20,
              "ChipTaskArgs layout is part of the host ABI");

// A copy of external tensor i, as some generated code spells it.
static inline ChipTensor from_tensor_arg(const ChipTensorArg& arg) { return arg.ref(); }

struct PTO2OrchestrationConfig {
    int expected_arg_count;
};

// ---------------------------------------------------------------------------
// Task arguments.
// ---------------------------------------------------------------------------

// Describes a tensor the runtime allocates (an intermediate or a task output).
class TensorCreateInfo {
public:
    TensorCreateInfo() : TensorCreateInfo(nullptr, 0) {}
    TensorCreateInfo(const uint32_t* shapes, uint32_t ndims, DataType dtype = DataType::FLOAT32)
        : ndims_(ndims), dtype_(dtype) {
        for (uint32_t d = 0; d < MAX_TENSOR_DIMS; ++d) {
            shapes_[d] = (d < ndims && shapes != nullptr) ? shapes[d] : 1;
        }
    }

    uint32_t ndims() const { return ndims_; }
    DataType dtype() const { return dtype_; }
    const uint32_t* shapes() const { return shapes_; }
    bool valid() const { return ndims_ >= 1 && ndims_ <= MAX_TENSOR_DIMS; }

    // A contiguous row-major record with buffer.addr == 0 (set by the runtime).
    void fill(ChipTensor& t) const {
        t = ChipTensor{};
        t.owner_task_id.raw = PTO2_EXTERNAL_TASK_ID;
        t.ndims = ndims_;
        t.dtype = dtype_;
        t.is_contiguous = true;
        t.address_space = AddressSpace::DEVICE;
        uint64_t elems = 1;
        for (uint32_t d = ndims_; d-- > 0;) {
            t.shapes[d] = shapes_[d];
            t.strides[d] = static_cast<uint32_t>(elems);
            elems *= shapes_[d];
        }
        uint64_t bytes = elems * get_element_size(dtype_);
        if (dtype_ == DataType::FP4E2M1) bytes = (elems + 1) / 2;
        t.buffer.size = bytes;
        t.extent_elem_cache = elems;
    }

private:
    uint32_t shapes_[MAX_TENSOR_DIMS];
    uint32_t ndims_;
    DataType dtype_;
};

// Raw 64-bit pattern of a scalar argument: floats keep their IEEE bits in the
// low bytes, signed integers are sign-extended, enums use their underlying type.
template <typename T>
static inline uint64_t pto_host_to_u64(T value) {
    static_assert(std::is_arithmetic<T>::value || std::is_enum<T>::value,
                  "add_scalar: the value must be an arithmetic type or an enum");
    if constexpr (std::is_enum<T>::value) {
        return pto_host_to_u64(static_cast<typename std::underlying_type<T>::type>(value));
    } else if constexpr (std::is_same<T, bool>::value) {
        return value ? 1u : 0u;
    } else if constexpr (std::is_floating_point<T>::value) {
        static_assert(sizeof(T) == 4 || sizeof(T) == 8, "add_scalar: only float and double are supported");
        if constexpr (sizeof(T) == 4) {
            uint32_t bits;
            __builtin_memcpy(&bits, &value, sizeof(bits));
            return bits;
        } else {
            uint64_t bits;
            __builtin_memcpy(&bits, &value, sizeof(bits));
            return bits;
        }
    } else if constexpr (std::is_signed<T>::value) {
        return static_cast<uint64_t>(static_cast<int64_t>(value));
    } else {
        return static_cast<uint64_t>(value);
    }
}

// Outputs the runtime created for one submit (or alloc_tensors), in add_output order.
class TaskOutputTensors {
public:
    uint32_t size() const { return count_; }
    bool empty() const { return count_ == 0; }

    const ChipTensor& get_ref(uint32_t i) const& {
        if (i >= count_) {
            rt_report_fatal(PTO_HOST_ERROR_INVALID_ARGS, "TaskOutputTensors::get_ref(%u) out of range (%u outputs)",
                            i, count_);
            return pto_host_dummy_tensor();
        }
        return tensors_[i];
    }
    // Borrowing from a temporary would dangle: keep the TaskOutputTensors in a variable.
    const ChipTensor& get_ref(uint32_t i) const&& = delete;

    // Runtime side (this header): append one record to fill.
    ChipTensor* append() { return count_ < PTO2_MAX_OUTPUTS ? &tensors_[count_++] : nullptr; }
    ChipTensor* data() { return tensors_; }
    void clear() { count_ = 0; }

private:
    ChipTensor tensors_[PTO2_MAX_OUTPUTS];
    uint32_t count_ = 0;
};

// Arguments of one task: tensors first (in kernel args order), then scalars.
class CoreTaskArgs {
public:
    void add_input(const ChipTensor& t) { add_tensor(&t, PTO_HOST_ARG_INPUT); }
    void add_inout(const ChipTensor& t) { add_tensor(&t, PTO_HOST_ARG_INOUT); }
    void add_output(const ChipTensor& t) { add_tensor(&t, PTO_HOST_ARG_OUTPUT_EXISTING); }
    void add_no_dep(const ChipTensor& t) { add_tensor(&t, PTO_HOST_ARG_NO_DEP); }

    // A runtime-allocated output; the info is copied, so a temporary is fine.
    void add_output(const TensorCreateInfo& ci) {
        if (!ci.valid()) {
            set_error("add_output: TensorCreateInfo ndims must be 1..5");
            return;
        }
        if (create_count_ >= PTO2_MAX_OUTPUTS) {
            set_error("add_output: too many runtime-created outputs (max 16)");
            return;
        }
        if (!add_tensor(nullptr, PTO_HOST_ARG_OUTPUT)) return;
        create_index_[tensor_count_ - 1] = static_cast<uint8_t>(create_count_);
        creates_[create_count_++] = ci;
    }

    template <typename T>
    void add_scalar(T value) {
        if (scalar_count_ >= CORE_MAX_SCALAR_ARGS) {
            set_error("add_scalar: too many scalar args (max 16)");
            return;
        }
        scalars_[scalar_count_++] = pto_host_to_u64(value);
    }

    void add_scalars(const uint64_t* values, int count) {
        for (int i = 0; i < count; ++i) add_scalar(values[i]);
    }

    uint32_t tensor_count() const { return tensor_count_; }
    uint32_t scalar_count() const { return scalar_count_; }
    bool has_error() const { return error_msg_ != nullptr; }
    const char* error_msg() const { return error_msg_; }

    void reset() {
        tensor_count_ = scalar_count_ = create_count_ = 0;
        error_msg_ = nullptr;
    }

    // Used by rt_submit_* (below).
    const ChipTensor* tensor_ptr(uint32_t i) const { return tensors_[i]; }
    int32_t arg_type(uint32_t i) const { return types_[i]; }
    const int32_t* arg_types() const { return types_; }
    const uint64_t* scalars() const { return scalars_; }
    const TensorCreateInfo& create_info(uint32_t i) const { return creates_[create_index_[i]]; }

private:
    bool add_tensor(const ChipTensor* t, int32_t type) {
        if (scalar_count_ != 0) {
            set_error("add_input/add_output/add_inout after add_scalar: tensors must come first");
            return false;
        }
        if (tensor_count_ >= CORE_MAX_TENSOR_ARGS) {
            set_error("too many tensor args (max 32)");
            return false;
        }
        tensors_[tensor_count_] = t;
        types_[tensor_count_] = type;
        ++tensor_count_;
        return true;
    }

    void set_error(const char* msg) {
        if (error_msg_ == nullptr) error_msg_ = msg;
    }

    const ChipTensor* tensors_[CORE_MAX_TENSOR_ARGS] = {};
    int32_t types_[CORE_MAX_TENSOR_ARGS] = {};
    uint8_t create_index_[CORE_MAX_TENSOR_ARGS] = {};
    uint64_t scalars_[CORE_MAX_SCALAR_ARGS] = {};
    TensorCreateInfo creates_[PTO2_MAX_OUTPUTS];
    uint32_t tensor_count_ = 0;
    uint32_t scalar_count_ = 0;
    uint32_t create_count_ = 0;
    const char* error_msg_ = nullptr;
};

// Some generated code names the task-argument type `Arg`.
using Arg = CoreTaskArgs;

// ---------------------------------------------------------------------------
// Submission, allocation and scopes (all through the ops table).
// ---------------------------------------------------------------------------

static inline TaskOutputTensors pto_host_submit(const char* caller, int32_t core_type, int32_t func_id,
                                                const CoreTaskArgs& args) {
    TaskOutputTensors outs;
    const PTO2RuntimeOps* ops = pto_host_ops(caller);
    if (ops->is_fatal(ops->ctx)) return outs;
    if (args.has_error()) {
        pto_host_report_fatal(PTO_HOST_ERROR_INVALID_ARGS, caller, "func_id %d: %s", static_cast<int>(func_id),
                              args.error_msg());
        return outs;
    }
    const ChipTensor* ptrs[CORE_MAX_TENSOR_ARGS];
    for (uint32_t i = 0; i < args.tensor_count(); ++i) {
        if (args.arg_type(i) == PTO_HOST_ARG_OUTPUT) {
            ChipTensor* rec = outs.append();
            args.create_info(i).fill(*rec);
            ptrs[i] = rec;
        } else {
            ptrs[i] = args.tensor_ptr(i);
        }
    }
    if (!outs.empty() && ops->alloc_tensors(ops->ctx, outs.data(), outs.size()) != 0) {
        pto_host_report_fatal(PTO_HOST_ERROR_RUNTIME, caller, "func_id %d: allocating %u output(s) failed",
                              static_cast<int>(func_id), outs.size());
        outs.clear();
        return outs;
    }
    int32_t rc = ops->submit_task(ops->ctx, core_type, func_id, ptrs, args.arg_types(), args.tensor_count(),
                                  args.scalars(), args.scalar_count());
    if (rc < 0) {
        if (!ops->is_fatal(ops->ctx)) {
            pto_host_report_fatal(PTO_HOST_ERROR_RUNTIME, caller, "func_id %d: submit failed (%d)",
                                  static_cast<int>(func_id), static_cast<int>(rc));
        }
        outs.clear();
    }
    return outs;
}

// Submit a task running kernel `func_id` on a cube (AIC) core.
static inline TaskOutputTensors rt_submit_aic_task(int func_id, const CoreTaskArgs& args) {
    return pto_host_submit("rt_submit_aic_task", PTO_HOST_CORE_AIC, func_id, args);
}

// Submit a task running kernel `func_id` on a vector (AIV) core.
static inline TaskOutputTensors rt_submit_aiv_task(int func_id, const CoreTaskArgs& args) {
    return pto_host_submit("rt_submit_aiv_task", PTO_HOST_CORE_AIV, func_id, args);
}

// Allocate runtime-owned tensors without a task (intermediates).
static inline TaskOutputTensors alloc_tensors(const TensorCreateInfo* infos, uint32_t count) {
    TaskOutputTensors outs;
    const PTO2RuntimeOps* ops = pto_host_ops("alloc_tensors");
    if (ops->is_fatal(ops->ctx)) return outs;
    for (uint32_t i = 0; i < count; ++i) {
        ChipTensor* rec = outs.append();
        if (rec == nullptr || !infos[i].valid()) {
            rt_report_fatal(PTO_HOST_ERROR_INVALID_ARGS, "alloc_tensors: bad TensorCreateInfo %u (max 16, ndims 1..5)",
                            i);
            outs.clear();
            return outs;
        }
        infos[i].fill(*rec);
    }
    if (!outs.empty() && ops->alloc_tensors(ops->ctx, outs.data(), outs.size()) != 0) {
        rt_report_fatal(PTO_HOST_ERROR_RUNTIME, "alloc_tensors: allocating %u tensor(s) failed", outs.size());
        outs.clear();
    }
    return outs;
}

template <typename... CIs>
static inline TaskOutputTensors alloc_tensors(const TensorCreateInfo& first, const CIs&... rest) {
    static_assert((std::is_same<typename std::decay<CIs>::type, TensorCreateInfo>::value && ...),
                  "alloc_tensors only accepts TensorCreateInfo arguments");
    const TensorCreateInfo infos[] = {first, rest...};
    return alloc_tensors(infos, static_cast<uint32_t>(1 + sizeof...(rest)));
}

static inline void rt_scope_begin() {
    const PTO2RuntimeOps* ops = pto_host_ops("rt_scope_begin");
    ops->scope_begin(ops->ctx);
}

static inline void rt_scope_end() {
    const PTO2RuntimeOps* ops = pto_host_ops("rt_scope_end");
    ops->scope_end(ops->ctx);
}

// Opens a scope for its lifetime; intermediates allocated inside it belong to it.
class PTO2ScopeGuard {
public:
    PTO2ScopeGuard() { rt_scope_begin(); }
    ~PTO2ScopeGuard() { rt_scope_end(); }
    PTO2ScopeGuard(const PTO2ScopeGuard&) = delete;
    PTO2ScopeGuard& operator=(const PTO2ScopeGuard&) = delete;
};

#define PTO_HOST_CONCAT_IMPL_(x, y) x##y
#define PTO_HOST_CONCAT_(x, y) PTO_HOST_CONCAT_IMPL_(x, y)
#define PTO2_SCOPE_GUARD() [[maybe_unused]] PTO2ScopeGuard PTO_HOST_CONCAT_(pto2_scope_guard_, __COUNTER__)

// Usage:  PTO2_SCOPE() { ...submit tasks... }
#define PTO2_SCOPE() if (PTO2_SCOPE_GUARD(); true)

#endif  // PYPTO_BUILD_HOST_PTO_ORCHESTRATION_API_H_
