// Per-frame uniforms: mirrors cubeforge::engine::FrameUniforms (engine/gpu_types.h).
layout(set = 0, binding = 0, std140) uniform FrameUniforms {
  mat4 view_projection;
  vec4 camera_position;
  vec4 light_direction[3];
  vec4 light_color[3];
  vec4 ambient_sky;
  vec4 ambient_ground;
  vec4 base_color;
  vec4 wire_color;
  vec4 background_top;
  vec4 background_bottom;
  vec4 grid_color;
  vec4 grid_plane;
  vec4 grid_center;
  uint shading_mode;
} frame;
