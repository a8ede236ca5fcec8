// Closed-form signed-distance fields for tests and benchmarks.
#include "inference/geometry/analytic_fields.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

namespace cubeforge {

namespace {

// Wraps a per-point function into a batched field.
template <class PointFunction>
FieldFunction pointwise(PointFunction function) {
  return [function](std::span<const float> points, std::span<float> values) -> Status {
    if (points.size() != values.size() * 3) {
      return make_error(ErrorCode::kInvalidArgument, "field: " + std::to_string(points.size()) +
                                                         " coordinates for " + std::to_string(values.size()) +
                                                         " values");
    }
    for (size_t p = 0; p < values.size(); ++p)
      values[p] = function(double(points[p * 3]), double(points[p * 3 + 1]), double(points[p * 3 + 2]));
    return ok_status();
  };
}

double capsule_distance(const std::array<float, 3>& a, const std::array<float, 3>& b, double x, double y, double z) {
  const double ab[3] = {double(b[0]) - a[0], double(b[1]) - a[1], double(b[2]) - a[2]};
  const double ap[3] = {x - a[0], y - a[1], z - a[2]};
  const double length2 = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
  const double t = std::clamp((ap[0] * ab[0] + ap[1] * ab[1] + ap[2] * ab[2]) / length2, 0.0, 1.0);
  const double d[3] = {ap[0] - t * ab[0], ap[1] - t * ab[1], ap[2] - t * ab[2]};
  return std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

}  // namespace

FieldFunction sphere_field(float radius, std::array<float, 3> centre) {
  return pointwise([=](double x, double y, double z) {
    const double dx = x - centre[0], dy = y - centre[1], dz = z - centre[2];
    return float(double(radius) - std::sqrt(dx * dx + dy * dy + dz * dz));
  });
}

FieldFunction torus_field(float major, float minor, std::array<float, 3> centre) {
  return pointwise([=](double x, double y, double z) {
    const double dx = x - centre[0], dy = y - centre[1], dz = z - centre[2];
    const double ring = std::sqrt(dx * dx + dy * dy) - double(major);
    return float(double(minor) - std::sqrt(ring * ring + dz * dz));
  });
}

FieldFunction box_field(std::array<float, 3> half_extents, std::array<float, 3> centre) {
  return pointwise([=](double x, double y, double z) {
    const double q[3] = {std::fabs(x - centre[0]) - half_extents[0], std::fabs(y - centre[1]) - half_extents[1],
                         std::fabs(z - centre[2]) - half_extents[2]};
    const double outside = std::sqrt(std::max(q[0], 0.0) * std::max(q[0], 0.0) +
                                     std::max(q[1], 0.0) * std::max(q[1], 0.0) +
                                     std::max(q[2], 0.0) * std::max(q[2], 0.0));
    const double inside = std::min(std::max(q[0], std::max(q[1], q[2])), 0.0);
    return float(-(outside + inside));
  });
}

FieldFunction rounded_box_field(std::array<float, 3> half_extents, float radius, std::array<float, 3> centre) {
  return pointwise([=](double x, double y, double z) {
    const double q[3] = {std::fabs(x - centre[0]) - (double(half_extents[0]) - radius),
                         std::fabs(y - centre[1]) - (double(half_extents[1]) - radius),
                         std::fabs(z - centre[2]) - (double(half_extents[2]) - radius)};
    const double outside = std::sqrt(std::max(q[0], 0.0) * std::max(q[0], 0.0) +
                                     std::max(q[1], 0.0) * std::max(q[1], 0.0) +
                                     std::max(q[2], 0.0) * std::max(q[2], 0.0));
    const double inside = std::min(std::max(q[0], std::max(q[1], q[2])), 0.0);
    return float(double(radius) - (outside + inside));
  });
}

FieldFunction capsule_field(std::array<float, 3> a, std::array<float, 3> b, float radius) {
  return pointwise([=](double x, double y, double z) { return float(double(radius) - capsule_distance(a, b, x, y, z)); });
}

FieldFunction union_field(std::vector<FieldFunction> parts) {
  auto shared_parts = std::make_shared<std::vector<FieldFunction>>(std::move(parts));
  return [shared_parts](std::span<const float> points, std::span<float> values) -> Status {
    std::vector<float> part_values(values.size());
    std::fill(values.begin(), values.end(), -INFINITY);
    for (const FieldFunction& part : *shared_parts) {
      CUBEFORGE_TRY(part(points, part_values));
      for (size_t p = 0; p < values.size(); ++p) values[p] = std::max(values[p], part_values[p]);
    }
    return ok_status();
  };
}

FieldFunction thin_shapes_field() {
  return union_field({
      sphere_field(0.45f, {-0.3f, 0.1f, 0.0f}),
      box_field({0.7f, 0.5f, 0.021f}, {0.1f, -0.1f, -0.6f}),              // a plate thinner than a coarse cell
      capsule_field({-0.9f, -0.8f, 0.7f}, {0.8f, 0.6f, 0.75f}, 0.025f),   // a thin rod, off the grid axes
      capsule_field({0.6f, -0.9f, -0.2f}, {0.6f, 0.9f, 0.4f}, 0.03f),
      sphere_field(0.05f, {0.7f, 0.7f, -0.1f}),                          // a small ball on its own
  });
}

FieldFunction creature_field(int extra_terms) {
  return pointwise([extra_terms](double x, double y, double z) {
    auto sphere = [&](double cx, double cy, double cz, double r) {
      const double dx = x - cx, dy = y - cy, dz = z - cz;
      return std::sqrt(dx * dx + dy * dy + dz * dz) - r;
    };
    auto smooth_min = [](double a, double b, double k) {
      const double h = std::clamp(0.5 + 0.5 * (b - a) / k, 0.0, 1.0);
      return b * (1 - h) + a * h - k * h * (1 - h);
    };
    double d = sphere(0.0, 0.0, 0.0, 0.45);                                     // body
    d = smooth_min(d, sphere(0.55, 0.0, 0.35, 0.22), 0.1);                      // head
    d = smooth_min(d, capsule_distance({-0.3f, 0.0f, 0.0f}, {-0.9f, 0.1f, 0.3f}, x, y, z) - 0.07, 0.08);  // tail
    for (int leg = 0; leg < 4; ++leg) {
      const float lx = leg < 2 ? 0.25f : -0.25f, ly = (leg % 2) ? 0.25f : -0.25f;
      d = smooth_min(d, capsule_distance({lx, ly, -0.2f}, {lx * 1.2f, ly * 1.4f, -0.9f}, x, y, z) - 0.06, 0.05);
    }
    {
      const double dx = x - 0.55, dz = z - 0.62;  // a ring on the head
      const double ring = std::sqrt(dx * dx + y * y) - 0.15;
      d = std::min(d, std::sqrt(ring * ring + dz * dz) - 0.03);
    }
    double ripple = 0.0;
    for (int t = 0; t < extra_terms; ++t) {
      const double f = 3.0 + 0.7 * t;
      ripple += std::sin(f * x + 0.3 * t) * std::cos(f * y - 0.2 * t) * std::sin(f * z + 0.1 * t) / (f * f);
    }
    return float(-(d + 0.01 * ripple) * 8.0);
  });
}

}  // namespace cubeforge
