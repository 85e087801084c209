/* neural_texture: renders a network exported by `coopnn export-shader --name texture` (or `coopnn fit-image
 * --export-shader DIR`) on a Vulkan device, as an engine would: the weights go through coopnn_weights.h, a
 * full-screen triangle's fragment shader includes texture.glsl and calls texture_eval per pixel, and the image is
 * read back and written as a PFM file (float RGB).
 *
 *   gcc -std=c99 -O2 -I EXPORT_DIR main.c -o neural_texture -lvulkan
 *   ./neural_texture WEIGHTS VERT.spv FRAG.spv WIDTH HEIGHT OUT.pfm [portable|coopvec]
 *
 * The SPIR-V comes from any compiler that knows GL_NV_cooperative_vector (glslang 15.1 or later) or, for the portable
 * variant, any GLSL compiler (frag.spv compiled with -DTEXTURE_PORTABLE). With NEURAL_TEXTURE_VALIDATION=1 it loads
 * the Khronos validation layer and fails on any message it reports.
 */
#define COOPNN_WEIGHTS_IMPLEMENTATION
#include "texture.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        VkResult result_ = (call);                                                           \
        if (result_ != VK_SUCCESS) fail("%s failed: VkResult %d", #call, (int)result_);      \
    } while (0)

/* VkPhysicalDeviceCooperativeVectorFeaturesNV (VK_NV_cooperative_vector), for headers older than the extension. */
typedef struct CooperativeVectorFeatures {
    VkStructureType sType;
    void* pNext;
    VkBool32 cooperativeVector;
    VkBool32 cooperativeVectorTraining;
} CooperativeVectorFeatures;
#define COOPERATIVE_VECTOR_FEATURES_STYPE ((VkStructureType)1000491000)
#define COOPERATIVE_VECTOR_EXTENSION "VK_NV_cooperative_vector"

static int validation_messages = 0;

static void fail(const char* format, ...) {
    va_list args;
    va_start(args, format);
    fputs("neural_texture: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(1);
}

static void* read_file(const char* path, size_t* size) {
    FILE* file = fopen(path, "rb");
    if (file == NULL) fail("cannot open %s", path);
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fseek(file, 0, SEEK_SET);
    void* data = malloc(length > 0 ? (size_t)length : 1);
    if (data == NULL || fread(data, 1, (size_t)length, file) != (size_t)length) fail("cannot read %s", path);
    fclose(file);
    *size = (size_t)length;
    return data;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
    (void)severity, (void)types, (void)user;
    fprintf(stderr, "validation: %s\n", data->pMessage);
    ++validation_messages;
    return VK_FALSE;
}

typedef struct Gpu {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
} Gpu;

static void create_instance(Gpu* gpu, int validation) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "neural_texture", 1, NULL, 0,
                             VK_API_VERSION_1_3};
    const char* layer = "VK_LAYER_KHRONOS_validation";
    const char* extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, validation ? 1u : 0u,
                                 validation ? &layer : NULL, validation ? 1u : 0u, validation ? &extension : NULL};
    CHECK(vkCreateInstance(&info, NULL, &gpu->instance));
    if (!validation) return;
    VkDebugUtilsMessengerCreateInfoEXT messenger = {
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT, NULL, 0,
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        on_message, NULL};
    PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
        gpu->instance, "vkCreateDebugUtilsMessengerEXT");
    if (create == NULL) fail("the validation layer offers no debug messenger");
    CHECK(create(gpu->instance, &messenger, NULL, &gpu->messenger));
}

static int has_extension(VkPhysicalDevice physical, const char* name) {
    uint32_t count = 0;
    vkEnumerateDeviceExtensionProperties(physical, NULL, &count, NULL);
    VkExtensionProperties* all = calloc(count ? count : 1, sizeof *all);
    vkEnumerateDeviceExtensionProperties(physical, NULL, &count, all);
    int found = 0;
    for (uint32_t i = 0; i < count && !found; ++i) found = strcmp(all[i].extensionName, name) == 0;
    free(all);
    return found;
}

/* The first device with a graphics queue (and cooperative vectors, for that variant). */
static void choose_device(Gpu* gpu, CoopnnVariant variant) {
    uint32_t count = 0;
    CHECK(vkEnumeratePhysicalDevices(gpu->instance, &count, NULL));
    VkPhysicalDevice devices[16];
    count = count < 16 ? count : 16;
    CHECK(vkEnumeratePhysicalDevices(gpu->instance, &count, devices));
    for (uint32_t d = 0; d < count; ++d) {
        if (variant == COOPNN_COOPVEC && !has_extension(devices[d], COOPERATIVE_VECTOR_EXTENSION)) continue;
        uint32_t families = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(devices[d], &families, NULL);
        VkQueueFamilyProperties properties[16];
        families = families < 16 ? families : 16;
        vkGetPhysicalDeviceQueueFamilyProperties(devices[d], &families, properties);
        for (uint32_t f = 0; f < families; ++f)
            if (properties[f].queueFlags & VK_QUEUE_GRAPHICS_BIT) {
                gpu->physical = devices[d];
                gpu->family = f;
                return;
            }
    }
    fail("no Vulkan device with a graphics queue%s", variant == COOPNN_COOPVEC ? " and cooperative vectors" : "");
}

static void create_device(Gpu* gpu, CoopnnVariant variant) {
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, gpu->family, 1, &priority};
    CooperativeVectorFeatures cooperative = {COOPERATIVE_VECTOR_FEATURES_STYPE, NULL, VK_TRUE, VK_FALSE};
    VkPhysicalDeviceVulkan12Features vulkan12;
    memset(&vulkan12, 0, sizeof vulkan12);
    vulkan12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    vulkan12.pNext = &cooperative;
    vulkan12.shaderFloat16 = VK_TRUE;
    vulkan12.vulkanMemoryModel = VK_TRUE;
    const char* extension = COOPERATIVE_VECTOR_EXTENSION;
    int coopvec = variant == COOPNN_COOPVEC;
    VkDeviceCreateInfo info = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, coopvec ? &vulkan12 : NULL, 0, 1, &queue, 0, NULL,
                               coopvec ? 1u : 0u, coopvec ? &extension : NULL, NULL};
    CHECK(vkCreateDevice(gpu->physical, &info, NULL, &gpu->device));
    vkGetDeviceQueue(gpu->device, gpu->family, 0, &gpu->queue);
}

static uint32_t memory_type(Gpu* gpu, uint32_t allowed, VkMemoryPropertyFlags wanted) {
    VkPhysicalDeviceMemoryProperties properties;
    vkGetPhysicalDeviceMemoryProperties(gpu->physical, &properties);
    for (uint32_t i = 0; i < properties.memoryTypeCount; ++i)
        if ((allowed & (1u << i)) && (properties.memoryTypes[i].propertyFlags & wanted) == wanted) return i;
    fail("no memory type with properties 0x%x", (unsigned)wanted);
    return 0;
}

static VkDeviceMemory allocate(Gpu* gpu, VkMemoryRequirements requirements, VkMemoryPropertyFlags wanted) {
    VkMemoryAllocateInfo info = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, requirements.size,
                                 memory_type(gpu, requirements.memoryTypeBits, wanted)};
    VkDeviceMemory memory;
    CHECK(vkAllocateMemory(gpu->device, &info, NULL, &memory));
    return memory;
}

static VkShaderModule shader_module(Gpu* gpu, const char* path) {
    size_t size;
    void* code = read_file(path, &size);
    VkShaderModuleCreateInfo info = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, size, (const uint32_t*)code};
    VkShaderModule module;
    CHECK(vkCreateShaderModule(gpu->device, &info, NULL, &module));
    free(code);
    return module;
}

typedef struct Target {
    VkImage image;
    VkDeviceMemory image_memory;
    VkImageView view;
    VkRenderPass render_pass;
    VkFramebuffer framebuffer;
    VkBuffer readback;
    VkDeviceMemory readback_memory;
} Target;

static void create_target(Gpu* gpu, Target* t, uint32_t width, uint32_t height) {
    VkImageCreateInfo image = {VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, NULL, 0, VK_IMAGE_TYPE_2D,
                               VK_FORMAT_R32G32B32A32_SFLOAT, {width, height, 1}, 1, 1, VK_SAMPLE_COUNT_1_BIT,
                               VK_IMAGE_TILING_OPTIMAL,
                               VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                               VK_SHARING_MODE_EXCLUSIVE, 0, NULL, VK_IMAGE_LAYOUT_UNDEFINED};
    CHECK(vkCreateImage(gpu->device, &image, NULL, &t->image));
    VkMemoryRequirements requirements;
    vkGetImageMemoryRequirements(gpu->device, t->image, &requirements);
    t->image_memory = allocate(gpu, requirements, 0);
    CHECK(vkBindImageMemory(gpu->device, t->image, t->image_memory, 0));
    VkImageViewCreateInfo view = {VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, NULL, 0, t->image, VK_IMAGE_VIEW_TYPE_2D,
                                  VK_FORMAT_R32G32B32A32_SFLOAT, {0, 0, 0, 0},
                                  {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
    CHECK(vkCreateImageView(gpu->device, &view, NULL, &t->view));
    VkAttachmentDescription attachment = {0, VK_FORMAT_R32G32B32A32_SFLOAT, VK_SAMPLE_COUNT_1_BIT,
                                          VK_ATTACHMENT_LOAD_OP_CLEAR, VK_ATTACHMENT_STORE_OP_STORE,
                                          VK_ATTACHMENT_LOAD_OP_DONT_CARE, VK_ATTACHMENT_STORE_OP_DONT_CARE,
                                          VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL};
    VkAttachmentReference reference = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
    VkSubpassDescription subpass = {0, VK_PIPELINE_BIND_POINT_GRAPHICS, 0, NULL, 1, &reference, NULL, NULL, 0, NULL};
    VkPipelineStageFlags output = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
    /* into the pass, the clear waits for the layout transition; out of it, the copy waits for the colour writes */
    VkSubpassDependency dependencies[2] = {
        {VK_SUBPASS_EXTERNAL, 0, output, output, 0, VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, 0},
        {0, VK_SUBPASS_EXTERNAL, output, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
         VK_ACCESS_TRANSFER_READ_BIT, 0}};
    VkRenderPassCreateInfo pass = {VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, NULL, 0, 1, &attachment, 1, &subpass,
                                   2, dependencies};
    CHECK(vkCreateRenderPass(gpu->device, &pass, NULL, &t->render_pass));
    VkFramebufferCreateInfo framebuffer = {VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, NULL, 0, t->render_pass, 1,
                                           &t->view, width, height, 1};
    CHECK(vkCreateFramebuffer(gpu->device, &framebuffer, NULL, &t->framebuffer));
    VkBufferCreateInfo buffer = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, (VkDeviceSize)width * height * 16,
                                 VK_BUFFER_USAGE_TRANSFER_DST_BIT, VK_SHARING_MODE_EXCLUSIVE, 0, NULL};
    CHECK(vkCreateBuffer(gpu->device, &buffer, NULL, &t->readback));
    vkGetBufferMemoryRequirements(gpu->device, t->readback, &requirements);
    t->readback_memory = allocate(gpu, requirements,
                                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    CHECK(vkBindBufferMemory(gpu->device, t->readback, t->readback_memory, 0));
}

typedef struct Pipeline {
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkPipeline pipeline;
} Pipeline;

static void create_pipeline(Gpu* gpu, Pipeline* p, const Target* t, const CoopnnWeights* weights,
                            const char* vertex_path, const char* fragment_path, uint32_t width, uint32_t height) {
    VkDescriptorSetLayoutBinding binding = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_FRAGMENT_BIT,
                                            NULL};
    VkDescriptorSetLayoutCreateInfo set_layout = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0, 1,
                                                  &binding};
    CHECK(vkCreateDescriptorSetLayout(gpu->device, &set_layout, NULL, &p->set_layout));
    VkPushConstantRange push = {VK_SHADER_STAGE_FRAGMENT_BIT, 0, 2 * sizeof(float)};
    VkPipelineLayoutCreateInfo layout = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &p->set_layout, 1,
                                         &push};
    CHECK(vkCreatePipelineLayout(gpu->device, &layout, NULL, &p->layout));
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    VkDescriptorPoolCreateInfo pool = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &size};
    CHECK(vkCreateDescriptorPool(gpu->device, &pool, NULL, &p->pool));
    VkDescriptorSetAllocateInfo allocate = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, p->pool, 1,
                                            &p->set_layout};
    CHECK(vkAllocateDescriptorSets(gpu->device, &allocate, &p->set));
    VkDescriptorBufferInfo buffer = {weights->buffer, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet write = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, p->set, 0, 0, 1,
                                  VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &buffer, NULL};
    vkUpdateDescriptorSets(gpu->device, 1, &write, 0, NULL);

    VkShaderModule vertex = shader_module(gpu, vertex_path), fragment = shader_module(gpu, fragment_path);
    VkPipelineShaderStageCreateInfo stages[2] = {
        {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_VERTEX_BIT, vertex, "main",
         NULL},
        /* the weights' offsets: NAME_SPEC_ID + i, from coopnn_weights_upload */
        {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0, VK_SHADER_STAGE_FRAGMENT_BIT, fragment, "main",
         &weights->specialization}};
    VkPipelineVertexInputStateCreateInfo input = {VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO, NULL, 0, 0,
                                                  NULL, 0, NULL};
    VkPipelineInputAssemblyStateCreateInfo assembly = {VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
                                                       NULL, 0, VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST, VK_FALSE};
    VkViewport viewport = {0, 0, (float)width, (float)height, 0, 1};
    VkRect2D scissor = {{0, 0}, {width, height}};
    VkPipelineViewportStateCreateInfo viewports = {VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, NULL, 0, 1,
                                                   &viewport, 1, &scissor};
    VkPipelineRasterizationStateCreateInfo raster = {VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
                                                     NULL, 0, VK_FALSE, VK_FALSE, VK_POLYGON_MODE_FILL,
                                                     VK_CULL_MODE_NONE, VK_FRONT_FACE_COUNTER_CLOCKWISE, VK_FALSE,
                                                     0, 0, 0, 1.0f};
    VkPipelineMultisampleStateCreateInfo multisample = {VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
                                                        NULL, 0, VK_SAMPLE_COUNT_1_BIT, VK_FALSE, 0, NULL,
                                                        VK_FALSE, VK_FALSE};
    VkPipelineColorBlendAttachmentState blend_attachment = {VK_FALSE, 0, 0, 0, 0, 0, 0, 0xF};
    VkPipelineColorBlendStateCreateInfo blend = {VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO, NULL, 0,
                                                 VK_FALSE, VK_LOGIC_OP_COPY, 1, &blend_attachment, {0, 0, 0, 0}};
    VkGraphicsPipelineCreateInfo info = {VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, NULL, 0, 2, stages, &input,
                                         &assembly, NULL, &viewports, &raster, &multisample, NULL, &blend, NULL,
                                         p->layout, t->render_pass, 0, VK_NULL_HANDLE, -1};
    CHECK(vkCreateGraphicsPipelines(gpu->device, VK_NULL_HANDLE, 1, &info, NULL, &p->pipeline));
    vkDestroyShaderModule(gpu->device, vertex, NULL);
    vkDestroyShaderModule(gpu->device, fragment, NULL);
}

static void draw(Gpu* gpu, const Target* t, const Pipeline* p, uint32_t width, uint32_t height) {
    VkCommandPoolCreateInfo pool_info = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, 0, gpu->family};
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(gpu->device, &pool_info, NULL, &pool));
    VkCommandBufferAllocateInfo allocate = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool,
                                            VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    VkCommandBuffer cmd;
    CHECK(vkAllocateCommandBuffers(gpu->device, &allocate, &cmd));
    VkCommandBufferBeginInfo begin = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                      VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    CHECK(vkBeginCommandBuffer(cmd, &begin));
    VkClearValue clear;
    memset(&clear, 0, sizeof clear);
    VkRenderPassBeginInfo pass = {VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, NULL, t->render_pass, t->framebuffer,
                                  {{0, 0}, {width, height}}, 1, &clear};
    vkCmdBeginRenderPass(cmd, &pass, VK_SUBPASS_CONTENTS_INLINE);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, p->pipeline);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, p->layout, 0, 1, &p->set, 0, NULL);
    float inverse_size[2] = {1.0f / (float)width, 1.0f / (float)height};
    vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_FRAGMENT_BIT, 0, sizeof inverse_size, inverse_size);
    vkCmdDraw(cmd, 3, 1, 0, 0);
    vkCmdEndRenderPass(cmd);
    VkBufferImageCopy region = {0, 0, 0, {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1}, {0, 0, 0}, {width, height, 1}};
    vkCmdCopyImageToBuffer(cmd, t->image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, t->readback, 1, &region);
    VkMemoryBarrier to_host = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_TRANSFER_WRITE_BIT,
                               VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0,
                         NULL);
    CHECK(vkEndCommandBuffer(cmd));
    VkSubmitInfo submit = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cmd, 0, NULL};
    CHECK(vkQueueSubmit(gpu->queue, 1, &submit, VK_NULL_HANDLE));
    CHECK(vkQueueWaitIdle(gpu->queue));
    vkDestroyCommandPool(gpu->device, pool, NULL);
}

/* PFM: a text header, then float RGB rows from the bottom of the image up (-1.0: little-endian). */
static void write_pfm(Gpu* gpu, const Target* t, uint32_t width, uint32_t height, const char* path) {
    float* pixels;
    CHECK(vkMapMemory(gpu->device, t->readback_memory, 0, VK_WHOLE_SIZE, 0, (void**)&pixels));
    FILE* file = fopen(path, "wb");
    if (file == NULL) fail("cannot write %s", path);
    fprintf(file, "PF\n%u %u\n-1.0\n", width, height);
    for (uint32_t row = height; row-- > 0;)
        for (uint32_t column = 0; column < width; ++column) fwrite(pixels + 4 * (row * width + column), 4, 3, file);
    fclose(file);
    vkUnmapMemory(gpu->device, t->readback_memory);
}

static void destroy(Gpu* gpu, Target* t, Pipeline* p, CoopnnWeights* weights) {
    VkDevice d = gpu->device;
    vkDestroyPipeline(d, p->pipeline, NULL);
    vkDestroyDescriptorPool(d, p->pool, NULL);
    vkDestroyPipelineLayout(d, p->layout, NULL);
    vkDestroyDescriptorSetLayout(d, p->set_layout, NULL);
    vkDestroyBuffer(d, t->readback, NULL);
    vkFreeMemory(d, t->readback_memory, NULL);
    vkDestroyFramebuffer(d, t->framebuffer, NULL);
    vkDestroyRenderPass(d, t->render_pass, NULL);
    vkDestroyImageView(d, t->view, NULL);
    vkDestroyImage(d, t->image, NULL);
    vkFreeMemory(d, t->image_memory, NULL);
    coopnn_weights_destroy(d, weights);
    vkDestroyDevice(d, NULL);
    if (gpu->messenger != VK_NULL_HANDLE) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(gpu->instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy_messenger(gpu->instance, gpu->messenger, NULL);
    }
    vkDestroyInstance(gpu->instance, NULL);
}

int main(int argc, char** argv) {
    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: %s WEIGHTS VERT.spv FRAG.spv WIDTH HEIGHT OUT.pfm [portable|coopvec]\n", argv[0]);
        return 2;
    }
    uint32_t width = (uint32_t)atoi(argv[4]), height = (uint32_t)atoi(argv[5]);
    CoopnnVariant variant = argc == 8 && strcmp(argv[7], "coopvec") == 0 ? COOPNN_COOPVEC : COOPNN_PORTABLE;
    if (width == 0 || height == 0) fail("WIDTH and HEIGHT must be whole numbers above zero");
    const char* validation = getenv("NEURAL_TEXTURE_VALIDATION");
    Gpu gpu;
    memset(&gpu, 0, sizeof gpu);
    create_instance(&gpu, validation != NULL && strcmp(validation, "1") == 0);
    choose_device(&gpu, variant);
    create_device(&gpu, variant);

    size_t size;
    void* file = read_file(argv[1], &size);
    CoopnnWeights weights;
    CoopnnStatus status = coopnn_weights_upload(gpu.physical, gpu.device, &texture_network, variant, file, size, 0,
                                                &weights);
    free(file);
    if (status != COOPNN_OK) fail("%s: %s", argv[1], coopnn_status_string(status));

    Target target;
    Pipeline pipeline;
    create_target(&gpu, &target, width, height);
    create_pipeline(&gpu, &pipeline, &target, &weights, argv[2], argv[3], width, height);
    draw(&gpu, &target, &pipeline, width, height);
    write_pfm(&gpu, &target, width, height, argv[6]);
    destroy(&gpu, &target, &pipeline, &weights);
    if (validation_messages) fail("the validation layer reported %d messages", validation_messages);
    printf("wrote %s (%ux%u, %s variant)\n", argv[6], width, height,
           variant == COOPNN_COOPVEC ? "coopvec" : "portable");
    return 0;
}
