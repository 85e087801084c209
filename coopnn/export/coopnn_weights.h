/* coopnn_weights.h: checks, sizes, converts and uploads the weights of a coopnn shader export on an engine's own
 * Vulkan device. Single header, C99, only <vulkan/vulkan.h>: include it anywhere for the declarations, and in one
 * C or C++ file after `#define COOPNN_WEIGHTS_IMPLEMENTATION` for the code. NAME.h (written by the export beside
 * NAME.weights.bin) describes the file as a CoopnnNetwork.
 *
 *   coopnn_check_weights   the file is the one NAME.h describes (size and FNV-1a hash), else COOPNN_WRONG_SIZE/HASH
 *   coopnn_weights_layout  the buffer a variant binds: its size and each matrix's, bias's and table's offset (the
 *                          shader's specialization constants NAME_SPEC_ID + i); for COOPNN_COOPVEC it asks the
 *                          driver (vkConvertCooperativeVectorMatrixNV) how large each InferencingOptimal matrix is
 *   coopnn_weights_fill    writes that buffer's bytes into host memory (mapped or staging), converting each matrix
 *   coopnn_weights_upload  all three into a new host-visible storage buffer (device-local where the device has such
 *                          memory) and a VkSpecializationInfo for the pipelines that read it
 *
 * The cooperative-vector variant needs a device created with VK_NV_cooperative_vector and its cooperativeVector
 * feature. The extension's conversion struct is declared here under a name of its own, with the layout of the
 * Khronos registry's vulkan_core.h, so that headers older than the extension serve as well.
 */
#ifndef COOPNN_WEIGHTS_H
#define COOPNN_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COOPNN_MAX_LAYERS 64
#define COOPNN_MAX_TABLES 16
#define COOPNN_MAX_OFFSETS (2 * COOPNN_MAX_LAYERS + COOPNN_MAX_TABLES)

typedef enum CoopnnStatus {
    COOPNN_OK = 0,
    COOPNN_WRONG_SIZE,       /* the weights file is not as long as NAME.h says */
    COOPNN_WRONG_HASH,       /* the weights file is not the one NAME.h was exported with */
    COOPNN_NO_CONVERSION,    /* the device offers no vkConvertCooperativeVectorMatrixNV (extension not enabled) */
    COOPNN_NO_MEMORY_TYPE,   /* no host-visible memory type can hold the buffer */
    COOPNN_TOO_MANY_LAYERS,  /* more than COOPNN_MAX_LAYERS layers or COOPNN_MAX_TABLES tables */
    COOPNN_WRONG_LAYOUT,     /* the layout passed to coopnn_weights_fill was made for another network or device */
    COOPNN_VULKAN_ERROR      /* a Vulkan call failed: CoopnnWeights.result holds its VkResult */
} CoopnnStatus;

typedef enum CoopnnVariant { COOPNN_COOPVEC = 0, COOPNN_PORTABLE = 1 } CoopnnVariant;

typedef struct CoopnnMatrix {
    uint32_t offset, size;       /* bytes of the row-major matrix in the weights file */
    uint32_t rows, columns;      /* padded shape */
    uint32_t stride;             /* bytes per row */
} CoopnnMatrix;

typedef struct CoopnnVector {
    uint32_t offset, size;       /* bytes of the bias or table in the weights file */
} CoopnnVector;

typedef struct CoopnnNetwork {
    const char* name;
    uint32_t layers;
    const CoopnnMatrix* matrices;
    const CoopnnVector* biases;
    uint32_t table_count;        /* the input stage's tables (a grid's feature vectors), copied as they are */
    const CoopnnVector* tables;
    uint64_t file_size;
    uint64_t file_fnv1a64;
    int32_t component_type;      /* VkComponentTypeKHR of the elements: 0 float16, 1 float32 */
} CoopnnNetwork;

typedef struct CoopnnLayout {
    size_t size;                                  /* bytes of the buffer the variant binds */
    uint32_t offsets[COOPNN_MAX_OFFSETS];         /* matrix i at [2i], its bias at [2i + 1], table k at [2L + k] */
    uint32_t count;                               /* 2 * layers + tables */
} CoopnnLayout;

typedef struct CoopnnWeights {
    VkBuffer buffer;
    VkDeviceMemory memory;
    CoopnnLayout layout;
    VkSpecializationMapEntry entries[COOPNN_MAX_OFFSETS];
    VkSpecializationInfo specialization;          /* points into this struct: keep it where it is while in use */
    VkResult result;                              /* the failed call's result for COOPNN_VULKAN_ERROR */
} CoopnnWeights;

const char* coopnn_status_string(CoopnnStatus status);
uint64_t coopnn_fnv1a64(const void* data, size_t size);
CoopnnStatus coopnn_check_weights(const CoopnnNetwork* network, const void* file, size_t file_size);
CoopnnStatus coopnn_weights_layout(VkDevice device, const CoopnnNetwork* network, CoopnnVariant variant,
                                   CoopnnLayout* layout);
CoopnnStatus coopnn_weights_fill(VkDevice device, const CoopnnNetwork* network, CoopnnVariant variant,
                                 const CoopnnLayout* layout, const void* file, void* destination);
CoopnnStatus coopnn_weights_upload(VkPhysicalDevice physical_device, VkDevice device, const CoopnnNetwork* network,
                                   CoopnnVariant variant, const void* file, size_t file_size, uint32_t spec_id,
                                   CoopnnWeights* weights);
void coopnn_weights_destroy(VkDevice device, CoopnnWeights* weights);

#ifdef __cplusplus
}
#endif

#ifdef COOPNN_WEIGHTS_IMPLEMENTATION

#include <string.h>

/* VkConvertCooperativeVectorMatrixInfoNV (VK_NV_cooperative_vector, spec version 4), enums as int32_t. */
typedef struct CoopnnConvertInfo {
    int32_t sType;
    const void* pNext;
    size_t srcSize;
    union { VkDeviceAddress deviceAddress; const void* hostAddress; } srcData;
    size_t* pDstSize;
    union { VkDeviceAddress deviceAddress; void* hostAddress; } dstData;
    int32_t srcComponentType, dstComponentType;
    uint32_t numRows, numColumns;
    int32_t srcLayout;
    size_t srcStride;
    int32_t dstLayout;
    size_t dstStride;
} CoopnnConvertInfo;

typedef VkResult (VKAPI_PTR *CoopnnConvertFunction)(VkDevice device, const CoopnnConvertInfo* info);

#define COOPNN_CONVERT_INFO_STYPE 1000491004
#define COOPNN_LAYOUT_ROW_MAJOR 0
#define COOPNN_LAYOUT_INFERENCING_OPTIMAL 2

static size_t coopnn_align(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

const char* coopnn_status_string(CoopnnStatus status) {
    switch (status) {
    case COOPNN_OK: return "ok";
    case COOPNN_WRONG_SIZE: return "the weights file's size does not match its NAME.h";
    case COOPNN_WRONG_HASH: return "the weights file's FNV-1a hash does not match its NAME.h (another export?)";
    case COOPNN_NO_CONVERSION: return "vkConvertCooperativeVectorMatrixNV is missing: enable VK_NV_cooperative_vector";
    case COOPNN_NO_MEMORY_TYPE: return "no host-visible memory type can hold the weights buffer";
    case COOPNN_TOO_MANY_LAYERS: return "the network has more layers or tables than COOPNN_MAX_LAYERS/TABLES";
    case COOPNN_WRONG_LAYOUT: return "the layout was made for another network or device";
    case COOPNN_VULKAN_ERROR: return "a Vulkan call failed";
    }
    return "unknown status";
}

uint64_t coopnn_fnv1a64(const void* data, size_t size) {
    const unsigned char* bytes = (const unsigned char*)data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
    return h;
}

CoopnnStatus coopnn_check_weights(const CoopnnNetwork* network, const void* file, size_t file_size) {
    if (file_size != network->file_size) return COOPNN_WRONG_SIZE;
    if (coopnn_fnv1a64(file, file_size) != network->file_fnv1a64) return COOPNN_WRONG_HASH;
    return network->layers > COOPNN_MAX_LAYERS || network->table_count > COOPNN_MAX_TABLES ? COOPNN_TOO_MANY_LAYERS
                                                                                           : COOPNN_OK;
}

static CoopnnConvertInfo coopnn_convert_info(const CoopnnNetwork* network, const CoopnnMatrix* m, size_t* dst_size) {
    CoopnnConvertInfo info;
    memset(&info, 0, sizeof info);
    info.sType = COOPNN_CONVERT_INFO_STYPE;
    info.srcSize = m->size;
    info.pDstSize = dst_size;
    info.srcComponentType = info.dstComponentType = network->component_type;
    info.numRows = m->rows;
    info.numColumns = m->columns;
    info.srcLayout = COOPNN_LAYOUT_ROW_MAJOR;
    info.srcStride = m->stride;
    info.dstLayout = COOPNN_LAYOUT_INFERENCING_OPTIMAL;
    return info;
}

static CoopnnConvertFunction coopnn_convert_function(VkDevice device) {
    return (CoopnnConvertFunction)vkGetDeviceProcAddr(device, "vkConvertCooperativeVectorMatrixNV");
}

/* The converted size of every matrix (COOPNN_COOPVEC) or its file size, into sizes[]. */
static CoopnnStatus coopnn_matrix_sizes(VkDevice device, const CoopnnNetwork* network, CoopnnVariant variant,
                                        size_t* sizes, VkResult* result) {
    CoopnnConvertFunction convert = variant == COOPNN_COOPVEC ? coopnn_convert_function(device) : NULL;
    if (variant == COOPNN_COOPVEC && convert == NULL) return COOPNN_NO_CONVERSION;
    for (uint32_t i = 0; i < network->layers; ++i) {
        sizes[i] = network->matrices[i].size;
        if (convert == NULL) continue;
        CoopnnConvertInfo info = coopnn_convert_info(network, &network->matrices[i], &sizes[i]);
        *result = convert(device, &info);
        if (*result != VK_SUCCESS) return COOPNN_VULKAN_ERROR;
    }
    return COOPNN_OK;
}

CoopnnStatus coopnn_weights_layout(VkDevice device, const CoopnnNetwork* network, CoopnnVariant variant,
                                   CoopnnLayout* layout) {
    size_t sizes[COOPNN_MAX_LAYERS];
    VkResult result = VK_SUCCESS;
    if (network->layers > COOPNN_MAX_LAYERS || network->table_count > COOPNN_MAX_TABLES) return COOPNN_TOO_MANY_LAYERS;
    memset(layout, 0, sizeof *layout);
    layout->count = 2 * network->layers + network->table_count;
    if (variant == COOPNN_PORTABLE) {
        for (uint32_t i = 0; i < network->layers; ++i) {
            layout->offsets[2 * i] = network->matrices[i].offset;
            layout->offsets[2 * i + 1] = network->biases[i].offset;
        }
        for (uint32_t k = 0; k < network->table_count; ++k)
            layout->offsets[2 * network->layers + k] = network->tables[k].offset;
        layout->size = (size_t)network->file_size;
        return COOPNN_OK;
    }
    CoopnnStatus status = coopnn_matrix_sizes(device, network, variant, sizes, &result);
    if (status != COOPNN_OK) return status;
    size_t end = 0;
    for (uint32_t i = 0; i < network->layers; ++i) {
        /* matrices at 64-byte offsets and biases at 16-byte ones, as VK_NV_cooperative_vector asks */
        size_t matrix = coopnn_align(end, 64), bias = coopnn_align(matrix + sizes[i], 16);
        layout->offsets[2 * i] = (uint32_t)matrix;
        layout->offsets[2 * i + 1] = (uint32_t)bias;
        end = bias + network->biases[i].size;
    }
    for (uint32_t k = 0; k < network->table_count; ++k) {
        size_t table = coopnn_align(end, 16);
        layout->offsets[2 * network->layers + k] = (uint32_t)table;
        end = table + network->tables[k].size;
    }
    layout->size = coopnn_align(end, 16);
    return COOPNN_OK;
}

CoopnnStatus coopnn_weights_fill(VkDevice device, const CoopnnNetwork* network, CoopnnVariant variant,
                                 const CoopnnLayout* layout, const void* file, void* destination) {
    const unsigned char* source = (const unsigned char*)file;
    unsigned char* out = (unsigned char*)destination;
    if (variant == COOPNN_PORTABLE) {
        memcpy(out, source, (size_t)network->file_size);
        return COOPNN_OK;
    }
    CoopnnConvertFunction convert = coopnn_convert_function(device);
    if (convert == NULL) return COOPNN_NO_CONVERSION;
    memset(out, 0, layout->size);
    for (uint32_t i = 0; i < network->layers; ++i) {
        const CoopnnMatrix* m = &network->matrices[i];
        size_t size = 0;
        CoopnnConvertInfo info = coopnn_convert_info(network, m, &size);
        if (convert(device, &info) != VK_SUCCESS) return COOPNN_VULKAN_ERROR; /* the size, with no destination */
        if (layout->offsets[2 * i] + size > layout->offsets[2 * i + 1]) return COOPNN_WRONG_LAYOUT;
        info.srcData.hostAddress = source + m->offset;
        info.dstData.hostAddress = out + layout->offsets[2 * i];
        if (convert(device, &info) != VK_SUCCESS) return COOPNN_VULKAN_ERROR;
        memcpy(out + layout->offsets[2 * i + 1], source + network->biases[i].offset, network->biases[i].size);
    }
    for (uint32_t k = 0; k < network->table_count; ++k)
        memcpy(out + layout->offsets[2 * network->layers + k], source + network->tables[k].offset,
               network->tables[k].size);
    return COOPNN_OK;
}

/* A host-visible memory type among `allowed`, device-local first; UINT32_MAX when there is none. */
static uint32_t coopnn_memory_type(VkPhysicalDevice physical_device, uint32_t allowed) {
    VkPhysicalDeviceMemoryProperties properties;
    vkGetPhysicalDeviceMemoryProperties(physical_device, &properties);
    const VkMemoryPropertyFlags wanted[2] = {
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
            VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT};
    for (int w = 0; w < 2; ++w)
        for (uint32_t i = 0; i < properties.memoryTypeCount; ++i)
            if ((allowed & (1u << i)) && (properties.memoryTypes[i].propertyFlags & wanted[w]) == wanted[w]) return i;
    return UINT32_MAX;
}

static CoopnnStatus coopnn_failed(CoopnnWeights* weights, VkResult result) {
    weights->result = result;
    return COOPNN_VULKAN_ERROR;
}

static CoopnnStatus coopnn_create_buffer(VkPhysicalDevice physical_device, VkDevice device, CoopnnWeights* weights) {
    VkBufferCreateInfo buffer_info;
    memset(&buffer_info, 0, sizeof buffer_info);
    buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    buffer_info.size = weights->layout.size;
    buffer_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    VkResult result = vkCreateBuffer(device, &buffer_info, NULL, &weights->buffer);
    if (result != VK_SUCCESS) return coopnn_failed(weights, result);
    VkMemoryRequirements requirements;
    vkGetBufferMemoryRequirements(device, weights->buffer, &requirements);
    VkMemoryAllocateInfo allocate;
    memset(&allocate, 0, sizeof allocate);
    allocate.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    allocate.allocationSize = requirements.size;
    allocate.memoryTypeIndex = coopnn_memory_type(physical_device, requirements.memoryTypeBits);
    if (allocate.memoryTypeIndex == UINT32_MAX) return COOPNN_NO_MEMORY_TYPE;
    result = vkAllocateMemory(device, &allocate, NULL, &weights->memory);
    if (result == VK_SUCCESS) result = vkBindBufferMemory(device, weights->buffer, weights->memory, 0);
    return result == VK_SUCCESS ? COOPNN_OK : coopnn_failed(weights, result);
}

static void coopnn_specialization(CoopnnWeights* weights, uint32_t spec_id) {
    for (uint32_t i = 0; i < weights->layout.count; ++i) {
        weights->entries[i].constantID = spec_id + i;
        weights->entries[i].offset = (uint32_t)(i * sizeof(uint32_t));
        weights->entries[i].size = sizeof(uint32_t);
    }
    weights->specialization.mapEntryCount = weights->layout.count;
    weights->specialization.pMapEntries = weights->entries;
    weights->specialization.dataSize = weights->layout.count * sizeof(uint32_t);
    weights->specialization.pData = weights->layout.offsets;
}

CoopnnStatus coopnn_weights_upload(VkPhysicalDevice physical_device, VkDevice device, const CoopnnNetwork* network,
                                   CoopnnVariant variant, const void* file, size_t file_size, uint32_t spec_id,
                                   CoopnnWeights* weights) {
    memset(weights, 0, sizeof *weights);
    CoopnnStatus status = coopnn_check_weights(network, file, file_size);
    if (status == COOPNN_OK) status = coopnn_weights_layout(device, network, variant, &weights->layout);
    if (status == COOPNN_OK) status = coopnn_create_buffer(physical_device, device, weights);
    void* mapped = NULL;
    if (status == COOPNN_OK) {
        VkResult result = vkMapMemory(device, weights->memory, 0, VK_WHOLE_SIZE, 0, &mapped);
        if (result != VK_SUCCESS) status = coopnn_failed(weights, result);
    }
    if (status == COOPNN_OK) {
        status = coopnn_weights_fill(device, network, variant, &weights->layout, file, mapped);
        vkUnmapMemory(device, weights->memory);
    }
    if (status != COOPNN_OK) {
        VkResult result = weights->result;
        coopnn_weights_destroy(device, weights);
        weights->result = result;
        return status;
    }
    coopnn_specialization(weights, spec_id);
    return COOPNN_OK;
}

void coopnn_weights_destroy(VkDevice device, CoopnnWeights* weights) {
    if (weights->buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, weights->buffer, NULL);
    if (weights->memory != VK_NULL_HANDLE) vkFreeMemory(device, weights->memory, NULL);
    memset(weights, 0, sizeof *weights);
}

#endif /* COOPNN_WEIGHTS_IMPLEMENTATION */
#endif /* COOPNN_WEIGHTS_H */
