#version 450
// Wireframe overlay: drawn with polygon mode LINE over the shaded mesh.
#include "frame_uniforms.glsl"
layout(location = 0) out vec4 out_color;

void main() {
  out_color = frame.wire_color;
}
