#version 450
// Vertical gradient. Alpha 0 marks "no mesh here", so coverage can be read from
// the alpha channel of an offscreen render.
#include "frame_uniforms.glsl"
layout(location = 0) in float in_height;
layout(location = 0) out vec4 out_color;

void main() {
  out_color = vec4(mix(frame.background_bottom.rgb, frame.background_top.rgb, clamp(in_height, 0.0, 1.0)), 0.0);
}
