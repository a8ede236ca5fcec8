#version 450
// Full-screen triangle for the background gradient; no vertex buffer.
layout(location = 0) out float out_height;  // 0 at the bottom edge, 1 at the top

void main() {
  vec2 corner = vec2((gl_VertexIndex << 1) & 2, gl_VertexIndex & 2);
  gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
  // Vulkan clip space has y down: clip y = -1 is the top row.
  out_height = 1.0 - corner.y;
}
