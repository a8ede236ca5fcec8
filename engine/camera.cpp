// Orbit camera maths (glm, right-handed, +y up).
#include "engine/camera.h"

#include <algorithm>
#include <cmath>

#include <glm/gtc/matrix_transform.hpp>

namespace cubeforge::engine {

glm::vec3 OrbitCamera::eye() const {
  float yaw = glm::radians(yaw_degrees);
  float pitch = glm::radians(pitch_degrees);
  glm::vec3 offset(std::cos(pitch) * std::sin(yaw), std::sin(pitch), std::cos(pitch) * std::cos(yaw));
  return target + distance * offset;
}

glm::mat4 OrbitCamera::view() const { return glm::lookAt(eye(), target, glm::vec3(0.f, 1.f, 0.f)); }

namespace {

// The region's own width / height, from the whole target's.
float region_aspect(const ViewRegion& region, float aspect) {
  return region.height() > 0.f ? aspect * region.width() / region.height() : aspect;
}

}  // namespace

glm::mat4 OrbitCamera::projection(float aspect) const {
  glm::mat4 p = glm::perspective(glm::radians(fov_y_degrees), region_aspect(region, aspect), near_plane, far_plane);
  p[1][1] *= -1.f;  // Vulkan's framebuffer y points down
  if (region == ViewRegion{}) return p;
  // Clip x' = sx*x + cx*w (and y alike) puts the region's [-1, 1] at its place
  // in the whole target's normalised coordinates (y down in Vulkan).
  glm::mat4 place(1.f);
  place[0][0] = region.width();
  place[1][1] = region.height();
  place[3][0] = region.left + region.right - 1.f;
  place[3][1] = region.top + region.bottom - 1.f;
  return place * p;
}

void OrbitCamera::orbit(float delta_yaw_degrees, float delta_pitch_degrees) {
  yaw_degrees = std::fmod(yaw_degrees + delta_yaw_degrees, 360.f);
  // Stop short of the poles, where lookAt's up vector becomes parallel to the view.
  pitch_degrees = std::clamp(pitch_degrees + delta_pitch_degrees, -89.f, 89.f);
}

void OrbitCamera::pan(float right_fraction, float up_fraction) {
  glm::mat4 v = view();
  glm::vec3 right(v[0][0], v[1][0], v[2][0]);
  glm::vec3 up(v[0][1], v[1][1], v[2][1]);
  float view_height = 2.f * distance * std::tan(glm::radians(fov_y_degrees) * 0.5f);
  target += (right * right_fraction + up * up_fraction) * view_height;
}

void OrbitCamera::zoom(float steps) {
  distance = std::max(distance * std::pow(0.9f, steps), 1e-4f);
  near_plane = std::min(near_plane, distance * 0.1f);
}

void OrbitCamera::frame(const Bounds3& bounds, float aspect, float margin) {
  glm::vec3 lo(-1.f), hi(1.f);
  if (!bounds.empty) {
    lo = {bounds.min[0], bounds.min[1], bounds.min[2]};
    hi = {bounds.max[0], bounds.max[1], bounds.max[2]};
  }
  target = (lo + hi) * 0.5f;
  float radius = std::max(glm::length(hi - lo) * 0.5f, 1e-4f);
  float half_fov_y = glm::radians(fov_y_degrees) * 0.5f;
  float half_fov_x = std::atan(std::tan(half_fov_y) * region_aspect(region, aspect));
  float half_fov = std::min(half_fov_y, half_fov_x);
  distance = radius * margin / std::sin(half_fov);
  near_plane = std::max(distance - radius * 2.f, distance * 0.01f);
  far_plane = distance + radius * 8.f;  // room for the ground grid behind the mesh
}

}  // namespace cubeforge::engine
