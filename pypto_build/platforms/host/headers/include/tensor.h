// tensor.h -- ChipTensor for pypto_build's `host` platform.
//
// Written by pypto_build for the host platform (a plain CPU, no NPU, no PyPTO
// runtime). It has the same 128-byte layout as the real runtime's ChipTensor
// (simpler src/common/task_interface/tensor.h, the revision PyPTO pins), so
// generated kernels that read `buffer.addr + start_offset` work unchanged; it
// is written from the documented layout, not copied from that header. Every
// offset is checked below at compile time.
//
// Kernels include this header, so it stays cheap: <cstddef>, <cstdint> and
// <type_traits> only.

#ifndef PYPTO_BUILD_HOST_TENSOR_H_
#define PYPTO_BUILD_HOST_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

// Maximum number of dimensions of a tensor view.
constexpr uint32_t MAX_TENSOR_DIMS = 5;

// Element type of a tensor. Values are part of the ABI (u8, in this order).
enum class DataType : uint8_t {
    FLOAT32 = 0,
    FLOAT16 = 1,
    INT32 = 2,
    INT16 = 3,
    INT8 = 4,
    UINT8 = 5,
    BFLOAT16 = 6,
    INT64 = 7,
    UINT64 = 8,
    UINT16 = 9,
    UINT32 = 10,
    BOOL = 11,
    FP8E4M3FN = 12,
    FP8E8M0 = 13,
    FP4E2M1 = 14,
};

// Bytes per element. FP4E2M1 packs two elements per byte; it reports 1 (the
// storage unit) and callers that size FP4 buffers must halve the count.
constexpr uint32_t get_element_size(DataType dtype) {
    switch (dtype) {
        case DataType::FLOAT32: return 4;
        case DataType::FLOAT16: return 2;
        case DataType::INT32: return 4;
        case DataType::INT16: return 2;
        case DataType::INT8: return 1;
        case DataType::UINT8: return 1;
        case DataType::BFLOAT16: return 2;
        case DataType::INT64: return 8;
        case DataType::UINT64: return 8;
        case DataType::UINT16: return 2;
        case DataType::UINT32: return 4;
        case DataType::BOOL: return 1;
        case DataType::FP8E4M3FN: return 1;
        case DataType::FP8E8M0: return 1;
        case DataType::FP4E2M1: return 1;
    }
    return 0;
}

// Where a buffer lives. On the host platform both are ordinary host memory.
enum class AddressSpace : uint8_t {
    HOST = 0,
    DEVICE = 1,
};

// The allocation a tensor view points into.
struct PTOBufferHandle {
    uint64_t addr;  // byte address of the allocation
    uint64_t size;  // its size in bytes
};

// Id of the task that created a tensor; UINT64_MAX marks an external tensor.
struct PTO2TaskId {
    uint64_t raw;
};

constexpr uint64_t PTO2_EXTERNAL_TASK_ID = UINT64_MAX;

// A tensor view as kernels and orchestration see it. Two cache lines.
struct alignas(64) ChipTensor {
    // ---- cache line 1 ----
    PTOBufferHandle buffer;            //  0: allocation (addr, size in bytes)
    PTO2TaskId owner_task_id;          // 16: creator task (UINT64_MAX = external)
    uint64_t start_offset;             // 24: view origin, in ELEMENTS from buffer.addr
    int32_t version;                   // 32: overlap-detection version
    uint32_t ndims;                    // 36: dimensions used (1..5)
    DataType dtype;                    // 40: element type
    bool manual_dep;                   // 41: creator-only dependency tracking
    bool is_contiguous;                // 42: strides are row-major for shapes
    AddressSpace address_space;        // 43: HOST or DEVICE
    uint32_t shapes[MAX_TENSOR_DIMS];  // 44: view shape per dimension, elements
    // ---- cache line 2 ----
    uint64_t extent_elem_cache;         // 64: cached extent in elements
    uint32_t strides[MAX_TENSOR_DIMS];  // 72: element stride per dimension (> 0)
    uint8_t padding[36];                // 92: reserved, up to 128 bytes
};

static_assert(std::is_trivially_copyable<ChipTensor>::value, "ChipTensor must be trivially copyable");
static_assert(std::is_standard_layout<ChipTensor>::value, "ChipTensor must be standard layout");
static_assert(sizeof(DataType) == 1, "DataType is a u8");
static_assert(sizeof(AddressSpace) == 1, "AddressSpace is a u8");
static_assert(sizeof(PTOBufferHandle) == 16, "PTOBufferHandle is two u64");
static_assert(sizeof(PTO2TaskId) == 8, "PTO2TaskId is one u64");
static_assert(alignof(ChipTensor) == 64, "ChipTensor is cache-line aligned");
static_assert(sizeof(ChipTensor) == 128, "ChipTensor is exactly two cache lines");
static_assert(offsetof(ChipTensor, buffer) + offsetof(PTOBufferHandle, addr) == 0, "buffer.addr");
static_assert(offsetof(ChipTensor, buffer) + offsetof(PTOBufferHandle, size) == 8, "buffer.size");
static_assert(offsetof(ChipTensor, owner_task_id) == 16, "owner_task_id");
static_assert(offsetof(ChipTensor, start_offset) == 24, "start_offset");
static_assert(offsetof(ChipTensor, version) == 32, "version");
static_assert(offsetof(ChipTensor, ndims) == 36, "ndims");
static_assert(offsetof(ChipTensor, dtype) == 40, "dtype");
static_assert(offsetof(ChipTensor, manual_dep) == 41, "manual_dep");
static_assert(offsetof(ChipTensor, is_contiguous) == 42, "is_contiguous");
static_assert(offsetof(ChipTensor, address_space) == 43, "address_space");
static_assert(offsetof(ChipTensor, shapes) == 44, "shapes");
static_assert(offsetof(ChipTensor, extent_elem_cache) == 64, "extent_elem_cache");
static_assert(offsetof(ChipTensor, strides) == 72, "strides");
static_assert(offsetof(ChipTensor, padding) == 92, "padding");

#endif  // PYPTO_BUILD_HOST_TENSOR_H_
