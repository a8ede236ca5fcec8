// Test meshes with known geometry (UV sphere, box, torus) and an independent
// pinhole projection, so renders can be checked against analytic silhouettes.
//
// The projection here is written from first principles (eye, right/up/forward
// basis from yaw and pitch), not with the engine's camera code, so a mistake in
// either shows up as a mismatch.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "inference/geometry/mesh.h"

namespace cubeforge::engine::testing {

constexpr double kPi = 3.14159265358979323846;

// Poles on the z axis, so a camera on +z looks straight at the +z pole vertex.
inline Mesh make_uv_sphere(float radius, int stacks, int slices, bool with_normals = true,
                           std::array<float, 3> center = {0.f, 0.f, 0.f}) {
  Mesh mesh;
  for (int i = 0; i <= stacks; ++i) {
    double theta = kPi * i / stacks;  // from +z
    for (int j = 0; j <= slices; ++j) {
      double phi = 2.0 * kPi * j / slices;
      double n[3] = {std::sin(theta) * std::cos(phi), std::sin(theta) * std::sin(phi), std::cos(theta)};
      for (int k = 0; k < 3; ++k) mesh.positions.push_back(float(center[k] + radius * n[k]));
      if (with_normals)
        for (int k = 0; k < 3; ++k) mesh.normals.push_back(float(n[k]));
    }
  }
  auto at = [&](int i, int j) { return uint32_t(i * (slices + 1) + j); };
  for (int i = 0; i < stacks; ++i) {
    for (int j = 0; j < slices; ++j) {
      if (i != 0) mesh.indices.insert(mesh.indices.end(), {at(i, j), at(i + 1, j), at(i, j + 1)});
      if (i != stacks - 1) mesh.indices.insert(mesh.indices.end(), {at(i, j + 1), at(i + 1, j), at(i + 1, j + 1)});
    }
  }
  return mesh;
}

// Axis-aligned box, 24 vertices (flat normals per face), 12 triangles.
inline Mesh make_box(std::array<float, 3> half, std::array<float, 3> center = {0.f, 0.f, 0.f}) {
  Mesh mesh;
  for (int axis = 0; axis < 3; ++axis) {
    for (int sign : {-1, 1}) {
      int u = (axis + 1) % 3, v = (axis + 2) % 3;
      uint32_t base = uint32_t(mesh.vertex_count());
      for (auto [su, sv] : {std::pair{-1, -1}, {1, -1}, {1, 1}, {-1, 1}}) {
        float p[3];
        p[axis] = center[axis] + sign * half[axis];
        p[u] = center[u] + su * half[u];
        p[v] = center[v] + sv * half[v];
        mesh.positions.insert(mesh.positions.end(), {p[0], p[1], p[2]});
        float n[3] = {0.f, 0.f, 0.f};
        n[axis] = float(sign);
        mesh.normals.insert(mesh.normals.end(), {n[0], n[1], n[2]});
      }
      if (sign > 0)
        mesh.indices.insert(mesh.indices.end(), {base, base + 1, base + 2, base, base + 2, base + 3});
      else
        mesh.indices.insert(mesh.indices.end(), {base, base + 2, base + 1, base, base + 3, base + 2});
    }
  }
  return mesh;
}

// Torus around the z axis: ring radius `major`, tube radius `minor`.
inline Mesh make_torus(float major, float minor, int major_segments, int minor_segments) {
  Mesh mesh;
  for (int i = 0; i <= major_segments; ++i) {
    double u = 2.0 * kPi * i / major_segments;
    for (int j = 0; j <= minor_segments; ++j) {
      double v = 2.0 * kPi * j / minor_segments;
      double n[3] = {std::cos(v) * std::cos(u), std::cos(v) * std::sin(u), std::sin(v)};
      mesh.positions.push_back(float((major + minor * std::cos(v)) * std::cos(u)));
      mesh.positions.push_back(float((major + minor * std::cos(v)) * std::sin(u)));
      mesh.positions.push_back(float(minor * std::sin(v)));
      for (int k = 0; k < 3; ++k) mesh.normals.push_back(float(n[k]));
    }
  }
  auto at = [&](int i, int j) { return uint32_t(i * (minor_segments + 1) + j); };
  for (int i = 0; i < major_segments; ++i)
    for (int j = 0; j < minor_segments; ++j)
      mesh.indices.insert(mesh.indices.end(),
                          {at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j), at(i + 1, j + 1), at(i, j + 1)});
  return mesh;
}

struct Vec3d {
  double x, y, z;
};
inline Vec3d operator-(Vec3d a, Vec3d b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline Vec3d operator+(Vec3d a, Vec3d b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline Vec3d operator*(double s, Vec3d a) { return {s * a.x, s * a.y, s * a.z}; }
inline double dot(Vec3d a, Vec3d b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline Vec3d cross(Vec3d a, Vec3d b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
inline Vec3d normalized(Vec3d a) { return (1.0 / std::sqrt(dot(a, a))) * a; }

// A pinhole camera orbiting `target`, as the viewport's orbit camera is documented:
// yaw 0 / pitch 0 puts the eye on +z, world +y is up, pixel rows grow downwards.
struct Pinhole {
  Vec3d eye, right, up, forward;
  double focal_px;  // pixels per unit of tan(angle)
  double width, height;

  Pinhole(Vec3d target, double distance, double yaw_degrees, double pitch_degrees, double fov_y_degrees, int w, int h)
      : width(w), height(h) {
    double yaw = yaw_degrees * kPi / 180.0, pitch = pitch_degrees * kPi / 180.0;
    eye = target + distance * Vec3d{std::cos(pitch) * std::sin(yaw), std::sin(pitch), std::cos(pitch) * std::cos(yaw)};
    forward = normalized(target - eye);
    right = normalized(cross(forward, {0, 1, 0}));
    up = cross(right, forward);
    focal_px = (h / 2.0) / std::tan(fov_y_degrees * kPi / 360.0);
  }
  std::array<double, 2> project(Vec3d p) const {
    Vec3d d = p - eye;
    double z = dot(d, forward);
    return {width / 2.0 + focal_px * dot(d, right) / z, height / 2.0 - focal_px * dot(d, up) / z};
  }
  // World direction through pixel position (px, py) (pixel centres at +0.5).
  Vec3d ray(double px, double py) const {
    return normalized(forward + ((px - width / 2.0) / focal_px) * right + (-(py - height / 2.0) / focal_px) * up);
  }
};

// Area and centroid of the convex hull of 2D points (Andrew's monotone chain + shoelace).
struct Polygon2 {
  double area;
  double cx, cy;
};
inline Polygon2 convex_hull_area(std::vector<std::array<double, 2>> points) {
  std::sort(points.begin(), points.end());
  std::vector<std::array<double, 2>> hull(2 * points.size());
  auto turn = [](const std::array<double, 2>& o, const std::array<double, 2>& a, const std::array<double, 2>& b) {
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
  };
  size_t k = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    while (k >= 2 && turn(hull[k - 2], hull[k - 1], points[i]) <= 0) k--;
    hull[k++] = points[i];
  }
  for (size_t i = points.size() - 1, t = k + 1; i-- > 0;) {
    while (k >= t && turn(hull[k - 2], hull[k - 1], points[i]) <= 0) k--;
    hull[k++] = points[i];
  }
  hull.resize(k - 1);
  double area2 = 0, cx = 0, cy = 0;
  for (size_t i = 0; i < hull.size(); ++i) {
    const auto& a = hull[i];
    const auto& b = hull[(i + 1) % hull.size()];
    double c = a[0] * b[1] - b[0] * a[1];
    area2 += c;
    cx += (a[0] + b[0]) * c;
    cy += (a[1] + b[1]) * c;
  }
  return {std::abs(area2) / 2.0, cx / (3.0 * area2), cy / (3.0 * area2)};
}

// Coverage statistics from the alpha channel of an offscreen render.
struct Coverage {
  double area_px = 0;
  double cx = 0, cy = 0;
};
inline Coverage measure_coverage(const std::vector<uint8_t>& rgba, int width, int height) {
  Coverage c;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      double a = rgba[(size_t(y) * width + x) * 4 + 3] / 255.0;
      c.area_px += a;
      c.cx += a * (x + 0.5);
      c.cy += a * (y + 0.5);
    }
  if (c.area_px > 0) c.cx /= c.area_px, c.cy /= c.area_px;
  return c;
}

// View-space distance from a [0,1] depth value of a perspective projection.
inline double linear_depth(double depth, double near_plane, double far_plane) {
  return near_plane * far_plane / (far_plane - depth * (far_plane - near_plane));
}

}  // namespace cubeforge::engine::testing
