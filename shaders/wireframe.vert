#version 450
// Wireframe overlay: positions only (normals are bound but unused).
#include "frame_uniforms.glsl"
layout(location = 0) in vec3 in_position;

void main() {
  gl_Position = frame.view_projection * vec4(in_position, 1.0);
}
