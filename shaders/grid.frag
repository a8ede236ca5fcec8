#version 450
// Anti-aliased grid lines from screen-space derivatives, fading with distance
// from the grid centre. Blended over the background; never writes alpha.
#include "frame_uniforms.glsl"
layout(location = 0) in vec3 in_world_position;
layout(location = 0) out vec4 out_color;

void main() {
  vec2 cell = in_world_position.xz / frame.grid_plane.y;
  vec2 width = fwidth(cell);
  vec2 distance_to_line = abs(fract(cell - 0.5) - 0.5) / max(width, vec2(1e-6));
  float line = 1.0 - min(min(distance_to_line.x, distance_to_line.y), 1.0);
  float radius = length(in_world_position.xz - frame.grid_center.xz);
  float fade = 1.0 - smoothstep(frame.grid_plane.w, frame.grid_plane.z, radius);
  out_color = vec4(frame.grid_color.rgb, frame.grid_color.a * line * fade);
}
