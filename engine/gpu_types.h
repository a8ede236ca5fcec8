// Structs shared with the shaders (shaders/frame_uniforms.glsl).
//
// Layouts follow std140; every offset the shader relies on is pinned by a
// static_assert so a field added on one side only fails the build.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cubeforge::engine {

constexpr int kStudioLightCount = 3;  // key, fill, rim

enum class ShadingMode : uint32_t { kSmooth = 0, kFlat = 1 };

// set 0, binding 0: one per frame in flight.
struct FrameUniforms {
  float view_projection[16];                   // column-major, Vulkan clip space (y down, z in [0,1])
  float camera_position[4];                    // xyz world, w unused
  float light_direction[kStudioLightCount][4]; // world-space unit vector towards the light, w unused
  float light_color[kStudioLightCount][4];     // rgb radiance, w specular strength
  float ambient_sky[4];                        // hemispheric ambient from +y
  float ambient_ground[4];                     // hemispheric ambient from -y
  float base_color[4];                         // mesh albedo, a = 1
  float wire_color[4];                         // overlay colour
  float background_top[4];
  float background_bottom[4];
  float grid_color[4];
  float grid_plane[4];   // x: ground height (world y), y: cell size, z: half extent, w: fade start distance
  float grid_center[4];  // xz: centre of the grid square
  uint32_t shading_mode; // ShadingMode
  uint32_t padding[3];
};

static_assert(sizeof(FrameUniforms) == 336, "FrameUniforms must match shaders/frame_uniforms.glsl");
static_assert(offsetof(FrameUniforms, camera_position) == 64);
static_assert(offsetof(FrameUniforms, light_direction) == 80);
static_assert(offsetof(FrameUniforms, light_color) == 128);
static_assert(offsetof(FrameUniforms, ambient_sky) == 176);
static_assert(offsetof(FrameUniforms, ambient_ground) == 192);
static_assert(offsetof(FrameUniforms, base_color) == 208);
static_assert(offsetof(FrameUniforms, wire_color) == 224);
static_assert(offsetof(FrameUniforms, background_top) == 240);
static_assert(offsetof(FrameUniforms, background_bottom) == 256);
static_assert(offsetof(FrameUniforms, grid_color) == 272);
static_assert(offsetof(FrameUniforms, grid_plane) == 288);
static_assert(offsetof(FrameUniforms, grid_center) == 304);
static_assert(offsetof(FrameUniforms, shading_mode) == 320);

// Vertex streams: binding 0 positions, binding 1 normals, both tightly packed
// float3 (the Mesh arrays as they are), located in one buffer one after the other.
constexpr uint32_t kVertexStride = 3 * sizeof(float);
static_assert(kVertexStride == 12, "vertex attributes are R32G32B32_SFLOAT");

}  // namespace cubeforge::engine
