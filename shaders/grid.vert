#version 450
// Ground grid: one square on the plane y = grid_plane.x, centred under the mesh.
#include "frame_uniforms.glsl"
layout(location = 0) out vec3 out_world_position;

void main() {
  const vec2 corners[6] = vec2[](vec2(-1, -1), vec2(1, -1), vec2(1, 1), vec2(-1, -1), vec2(1, 1), vec2(-1, 1));
  vec2 corner = corners[gl_VertexIndex] * frame.grid_plane.z + frame.grid_center.xz;
  out_world_position = vec3(corner.x, frame.grid_plane.x, corner.y);
  gl_Position = frame.view_projection * vec4(out_world_position, 1.0);
}
