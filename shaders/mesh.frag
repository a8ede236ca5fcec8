#version 450
// Studio lighting: three directional lights (key, fill, rim) with Blinn-Phong
// highlights and a sky/ground hemispheric ambient. Lighting is two-sided because
// generated meshes may be open or inconsistently wound. Alpha 1 marks coverage.
#include "frame_uniforms.glsl"
layout(location = 0) in vec3 in_world_position;
layout(location = 1) in vec3 in_normal;
layout(location = 0) out vec4 out_color;

void main() {
  vec3 to_eye = normalize(frame.camera_position.xyz - in_world_position);
  // The face's own normal, turned towards the eye: the side being seen.
  vec3 face = normalize(cross(dFdx(in_world_position), dFdy(in_world_position)));
  if (dot(face, to_eye) < 0.0) face = -face;
  vec3 normal = face;
  if (frame.shading_mode != 1u && dot(in_normal, in_normal) > 1e-12) {
    // Smooth: the interpolated normal, flipped only when it belongs to the
    // other side of the surface (inconsistent winding). Flipping it by the
    // view direction instead turned pixels near silhouettes, where a smooth
    // normal leans slightly away from the eye, into dark specks.
    normal = normalize(in_normal);
    if (dot(normal, face) < 0.0) normal = -normal;
  }

  vec3 albedo = frame.base_color.rgb;
  float up = normal.y * 0.5 + 0.5;
  vec3 color = albedo * mix(frame.ambient_ground.rgb, frame.ambient_sky.rgb, up);
  for (int i = 0; i < 3; ++i) {
    vec3 to_light = frame.light_direction[i].xyz;
    float diffuse = max(dot(normal, to_light), 0.0);
    vec3 half_vector = normalize(to_light + to_eye);
    float specular = pow(max(dot(normal, half_vector), 0.0), 48.0) * frame.light_color[i].w;
    color += frame.light_color[i].rgb * (albedo * diffuse + vec3(specular) * step(0.0, diffuse));
  }
  out_color = vec4(color, 1.0);
}
