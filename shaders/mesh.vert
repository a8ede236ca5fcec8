#version 450
// Mesh vertices are in world space already (the viewport shows the mesh as made).
#include "frame_uniforms.glsl"
layout(location = 0) in vec3 in_position;
layout(location = 1) in vec3 in_normal;
layout(location = 0) out vec3 out_world_position;
layout(location = 1) out vec3 out_normal;

void main() {
  out_world_position = in_position;
  out_normal = in_normal;
  gl_Position = frame.view_projection * vec4(in_position, 1.0);
}
