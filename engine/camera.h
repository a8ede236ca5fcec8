// Orbit camera: yaw/pitch around a target at a distance, with pan, zoom and
// auto-framing of a bounding box. Produces Vulkan clip-space matrices
// (y down, depth 0 at the near plane and 1 at the far plane).
#pragma once

#include <array>

#include <glm/glm.hpp>

#include "inference/geometry/mesh.h"

namespace cubeforge::engine {

// The part of the target the view is framed for, as fractions of its width
// and height from the top-left corner. The scene still fills the whole target;
// the projection moves and scales so that the view's centre and framing fall
// in this part (the desktop app's free area between its panels).
struct ViewRegion {
  float left = 0.f, top = 0.f, right = 1.f, bottom = 1.f;
  float width() const { return right - left; }
  float height() const { return bottom - top; }
  bool operator==(const ViewRegion& o) const {
    return left == o.left && top == o.top && right == o.right && bottom == o.bottom;
  }
};

struct OrbitCamera {
  glm::vec3 target{0.f, 0.f, 0.f};
  float distance = 3.f;
  float yaw_degrees = 0.f;    // 0: eye on +z looking towards -z; positive turns the eye towards +x
  float pitch_degrees = 0.f;  // positive: eye above the target, looking down
  float fov_y_degrees = 45.f;
  float near_plane = 0.01f;
  float far_plane = 100.f;
  ViewRegion region;

  glm::vec3 eye() const;
  glm::mat4 view() const;
  // Vulkan clip space; aspect is the whole target's width / height.
  glm::mat4 projection(float aspect) const;
  glm::mat4 view_projection(float aspect) const { return projection(aspect) * view(); }

  // Mouse-style controls; angles in degrees, pan in fractions of the view height.
  void orbit(float delta_yaw_degrees, float delta_pitch_degrees);
  void pan(float right_fraction, float up_fraction);
  void zoom(float steps);  // positive moves closer; each step scales distance by 0.9

  // Centres on `bounds` and moves back until its bounding sphere fits the
  // vertical and horizontal field of view of the region with `margin`
  // (1 = touching); near/far planes follow the sphere. aspect: the whole target's.
  void frame(const Bounds3& bounds, float aspect, float margin = 1.15f);
};

}  // namespace cubeforge::engine
