// Orbit camera: yaw/pitch around a target at a distance, with pan, zoom and
// auto-framing of a bounding box. Produces Vulkan clip-space matrices
// (y down, depth 0 at the near plane and 1 at the far plane).
#pragma once

#include <array>

#include <glm/glm.hpp>

#include "inference/geometry/mesh.h"

namespace cubeforge::engine {

struct OrbitCamera {
  glm::vec3 target{0.f, 0.f, 0.f};
  float distance = 3.f;
  float yaw_degrees = 0.f;    // 0: eye on +z looking towards -z; positive turns the eye towards +x
  float pitch_degrees = 0.f;  // positive: eye above the target, looking down
  float fov_y_degrees = 45.f;
  float near_plane = 0.01f;
  float far_plane = 100.f;

  glm::vec3 eye() const;
  glm::mat4 view() const;
  glm::mat4 projection(float aspect) const;  // Vulkan clip space
  glm::mat4 view_projection(float aspect) const { return projection(aspect) * view(); }

  // Mouse-style controls; angles in degrees, pan in fractions of the view height.
  void orbit(float delta_yaw_degrees, float delta_pitch_degrees);
  void pan(float right_fraction, float up_fraction);
  void zoom(float steps);  // positive moves closer; each step scales distance by 0.9

  // Centres on `bounds` and moves back until its bounding sphere fits the
  // vertical and horizontal field of view with `margin` (1 = touching);
  // near/far planes follow the sphere.
  void frame(const Bounds3& bounds, float aspect, float margin = 1.15f);
};

}  // namespace cubeforge::engine
