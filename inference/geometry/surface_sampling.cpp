// Area-weighted surface sampling and the reference's unit-cube rescale.
#include "inference/geometry/surface_sampling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace cubeforge {

namespace {

// A uniform double in [0, 1) from the generator's 53 high bits: the same on
// every standard library, unlike std::uniform_real_distribution.
double uniform01(std::mt19937_64& generator) { return double(generator() >> 11) * 0x1.0p-53; }

}  // namespace

Result<RescaleTransform> unit_cube_transform(const Mesh& mesh, float mesh_scale) {
  if (mesh.empty()) return make_error(ErrorCode::kInvalidArgument, "cannot rescale an empty mesh (no faces)");
  double low[3] = {INFINITY, INFINITY, INFINITY}, high[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (uint32_t v : mesh.indices) {
    if (size_t(v) >= mesh.vertex_count()) {
      return make_error(ErrorCode::kInvalidArgument, "mesh index " + std::to_string(v) + " is out of range (" +
                                                         std::to_string(mesh.vertex_count()) + " vertices)");
    }
    for (int a = 0; a < 3; ++a) {
      low[a] = std::min(low[a], double(mesh.positions[size_t(v) * 3 + a]));
      high[a] = std::max(high[a], double(mesh.positions[size_t(v) * 3 + a]));
    }
  }
  const double largest = std::max({high[0] - low[0], high[1] - low[1], high[2] - low[2]});
  if (!(largest > 0.0) || !std::isfinite(largest)) {
    return make_error(ErrorCode::kInvalidArgument, "cannot rescale a mesh whose bounding box has no extent");
  }
  RescaleTransform transform;
  for (int a = 0; a < 3; ++a) transform.centre[size_t(a)] = float((low[a] + high[a]) * 0.5);
  transform.scale = float(2.0 * double(mesh_scale) / largest);
  return transform;
}

void apply_transform(Mesh& mesh, const RescaleTransform& transform) {
  for (size_t i = 0; i < mesh.positions.size(); ++i)
    mesh.positions[i] = (mesh.positions[i] - transform.centre[i % 3]) * transform.scale;
}

Result<std::vector<float>> sample_surface(const Mesh& mesh, const SurfaceSamplingOptions& options,
                                          std::vector<uint32_t>* face_of_sample) {
  if (options.count <= 0) {
    return make_error(ErrorCode::kInvalidArgument, "sample count " + std::to_string(options.count) + " must be positive");
  }
  const size_t faces = mesh.face_count();
  std::vector<double> cumulative_area(faces);
  std::vector<float> face_normals(faces * 3);
  double total = 0.0;
  for (size_t f = 0; f < faces; ++f) {
    const float* p[3];
    for (int c = 0; c < 3; ++c) {
      const uint32_t v = mesh.indices[f * 3 + size_t(c)];
      if (size_t(v) >= mesh.vertex_count()) {
        return make_error(ErrorCode::kInvalidArgument, "mesh index " + std::to_string(v) + " is out of range (" +
                                                           std::to_string(mesh.vertex_count()) + " vertices)");
      }
      p[c] = &mesh.positions[size_t(v) * 3];
    }
    const double e1[3] = {double(p[1][0]) - p[0][0], double(p[1][1]) - p[0][1], double(p[1][2]) - p[0][2]};
    const double e2[3] = {double(p[2][0]) - p[0][0], double(p[2][1]) - p[0][1], double(p[2][2]) - p[0][2]};
    const double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    const double length = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    total += 0.5 * length;
    cumulative_area[f] = total;
    for (int a = 0; a < 3; ++a) face_normals[f * 3 + size_t(a)] = length > 0 ? float(n[a] / length) : 0.f;
  }
  if (!(total > 0.0)) {
    return make_error(ErrorCode::kInvalidArgument, "cannot sample a mesh with no surface area (" +
                                                       std::to_string(faces) + " faces)");
  }

  std::mt19937_64 generator(options.seed);
  std::vector<float> samples(size_t(options.count) * 6);
  if (face_of_sample) face_of_sample->resize(size_t(options.count));
  for (int64_t s = 0; s < options.count; ++s) {
    const double pick = uniform01(generator) * total;
    size_t f = size_t(std::upper_bound(cumulative_area.begin(), cumulative_area.end(), pick) - cumulative_area.begin());
    f = std::min(f, faces - 1);
    double u = uniform01(generator), v = uniform01(generator);
    if (u + v > 1.0) {  // fold the square's far half back onto the triangle
      u = 1.0 - u;
      v = 1.0 - v;
    }
    const float* p0 = &mesh.positions[size_t(mesh.indices[f * 3]) * 3];
    const float* p1 = &mesh.positions[size_t(mesh.indices[f * 3 + 1]) * 3];
    const float* p2 = &mesh.positions[size_t(mesh.indices[f * 3 + 2]) * 3];
    float* out = &samples[size_t(s) * 6];
    for (int a = 0; a < 3; ++a) {
      out[a] = float(double(p0[a]) + u * (double(p1[a]) - p0[a]) + v * (double(p2[a]) - p0[a]));
      out[3 + a] = face_normals[f * 3 + size_t(a)];
    }
    if (face_of_sample) (*face_of_sample)[size_t(s)] = uint32_t(f);
  }
  return samples;
}

Result<std::vector<float>> encoder_point_cloud(const Mesh& mesh, const SurfaceSamplingOptions& options) {
  CUBEFORGE_ASSIGN_OR_RETURN(RescaleTransform transform, unit_cube_transform(mesh));
  Mesh scaled = mesh;
  apply_transform(scaled, transform);
  return sample_surface(scaled, options);
}

}  // namespace cubeforge
